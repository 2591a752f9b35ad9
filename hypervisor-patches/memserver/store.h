/*
 * The pages a memory server holds: one arena of max_pages 4 KiB slots
 * keyed by (owner, page), each charged to the account of the lease that
 * wrote it. A lease's account is bounded by its quota: a write past it
 * drops that account's oldest pages, never another's.
 *
 * Single-threaded: the event loop is the only caller.
 */
#ifndef MEMSERVER_STORE_H
#define MEMSERVER_STORE_H

#include <stdint.h>

#define NIL UINT32_MAX

int store_init(uint32_t max_pages);

/*
 * The account of lease `lease` for `owner`, made on first use; a token
 * issued later than the account's last one sets its quota (dropping its
 * oldest pages down to it); one good for longer, when it expires. NIL
 * if the lease is known for another owner, or revoked.
 */
uint32_t store_open_account(const uint8_t lease[16], uint64_t owner,
			    uint64_t quota, uint64_t issued_at,
			    uint64_t expires_at);
/* 1 if account's connections may still be served at now (unix
 * seconds): its lease is not revoked and its latest token not expired. */
int store_usable(uint32_t account, uint64_t now);
/* Revoke owner's leases whose latest token was issued at or before
 * revoked_at: their connections are refused from now on and their
 * pages go back to the host; how many went. */
uint32_t store_revoke(uint64_t owner, uint64_t revoked_at);
/* Give back the pages of leases nobody is connected to whose latest
 * token expired at least grace seconds before now: their borrower is
 * gone (a live one presents a renewed token). How many went. */
uint32_t store_reclaim_orphans(uint64_t now, uint64_t grace);
/* The one account of --insecure mode: any owner, quota max_pages. */
uint32_t store_open_shared_account(void);

/* Connections using an account: one without either is forgotten. */
void store_attach(uint32_t account);
void store_detach(uint32_t account);
uint32_t store_attached(uint32_t account);
/* The pages an account may hold (at most max_pages). */
uint32_t store_quota(uint32_t account);

/* Store a page for account, overwriting owner's older copy of it: 0, or
 * -1 if the account can make no room (quota 0, or the arena full of
 * other accounts' pages). */
int store_put(uint32_t account, uint64_t owner, uint64_t page,
	      const uint8_t *data);
/* owner's page, or NULL; valid until the next store_* call. */
const uint8_t *store_get(uint64_t owner, uint64_t page);
/* 1 if owner holds every page of page .. page+count-1. */
int store_has_all(uint64_t owner, uint64_t page, uint32_t count);
/* Pages of the range that were held and are now gone. */
uint32_t store_delete(uint64_t owner, uint64_t page, uint32_t count);
/* Drop up to n pages, oldest written first, and give their memory back
 * to the host; how many were dropped. */
uint32_t store_reclaim(uint32_t n);

struct store_stat {
	uint32_t held;
	uint32_t max_pages;
	uint64_t dropped; /* quota/full drops and reclaims, not deletes */
};
void store_stat(struct store_stat *out);

#endif
