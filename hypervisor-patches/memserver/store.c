/*
 * The page store (store.h): a chained hash table of (owner, page) ->
 * slot in the arena. Every used slot is in two age lists, oldest written
 * first: the store's, which RECLAIM drops from, and its account's, which
 * that account's quota drops from.
 */
#define _GNU_SOURCE
#include "store.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "protocol.h"

struct links {
	uint32_t older, newer;
};

struct list {
	uint32_t oldest, newest;
};

struct slot {
	uint64_t owner;
	uint64_t page;
	uint32_t hash_next; /* or the next free slot */
	uint32_t account;
	struct links in_store, in_account;
};

struct account {
	uint8_t lease[16];
	uint64_t owner;
	uint64_t issued_at;
	uint64_t expires_at; /* of its latest token */
	uint32_t quota;
	uint32_t held;
	uint32_t attached; /* connections */
	uint32_t next_free;
	uint8_t used, any_owner, revoked;
	struct list pages;
};

static struct {
	uint8_t *arena;
	struct slot *slots;
	uint32_t *buckets;
	uint32_t bucket_mask;
	uint32_t max_pages;
	uint32_t held;
	uint32_t free_head;
	uint64_t dropped;
	struct list pages;
	struct account *accounts;
	uint32_t naccounts, free_account;
} store;

static uint32_t bucket_of(uint64_t owner, uint64_t page)
{
	uint64_t h = owner * 0x9E3779B97F4A7C15ull ^ page;
	h ^= h >> 33;
	h *= 0xFF51AFD7ED558CCDull;
	h ^= h >> 33;
	return (uint32_t)h & store.bucket_mask;
}

static uint8_t *slot_data(uint32_t s)
{
	return store.arena + (size_t)s * PAGE_SIZE;
}

static uint32_t lookup(uint64_t owner, uint64_t page)
{
	uint32_t s = store.buckets[bucket_of(owner, page)];
	while (s != NIL && (store.slots[s].owner != owner ||
			    store.slots[s].page != page))
		s = store.slots[s].hash_next;
	return s;
}

/* The links of slot s in the store's list (mine 0) or its account's. */
static struct links *links_of(uint32_t s, int mine)
{
	return mine ? &store.slots[s].in_account : &store.slots[s].in_store;
}

static void list_unlink(struct list *l, int mine, uint32_t s)
{
	struct links *x = links_of(s, mine);
	if (x->older != NIL)
		links_of(x->older, mine)->newer = x->newer;
	else
		l->oldest = x->newer;
	if (x->newer != NIL)
		links_of(x->newer, mine)->older = x->older;
	else
		l->newest = x->older;
}

static void list_append(struct list *l, int mine, uint32_t s)
{
	struct links *x = links_of(s, mine);
	x->older = l->newest;
	x->newer = NIL;
	if (l->newest != NIL)
		links_of(l->newest, mine)->newer = s;
	else
		l->oldest = s;
	l->newest = s;
}

static struct account *account_of(uint32_t a)
{
	return &store.accounts[a];
}

/* Forget an account nothing uses any more. */
static void maybe_forget(uint32_t a)
{
	struct account *x = account_of(a);
	if (x->held || x->attached || x->any_owner)
		return;
	x->used = 0;
	x->next_free = store.free_account;
	store.free_account = a;
}

static void charge(uint32_t s, uint32_t a)
{
	store.slots[s].account = a;
	account_of(a)->held++;
	list_append(&account_of(a)->pages, 1, s);
}

static void uncharge(uint32_t s)
{
	uint32_t a = store.slots[s].account;
	list_unlink(&account_of(a)->pages, 1, s);
	account_of(a)->held--;
	maybe_forget(a);
}

/* Unlink a used slot from its bucket, lists and account; free it. With
 * give_back, its memory returns to the host (the point of a reclaim). */
static void release(uint32_t s, int give_back)
{
	struct slot *x = &store.slots[s];
	uint32_t *link = &store.buckets[bucket_of(x->owner, x->page)];
	while (*link != s)
		link = &store.slots[*link].hash_next;
	*link = x->hash_next;
	list_unlink(&store.pages, 0, s);
	uncharge(s);
	x->hash_next = store.free_head;
	store.free_head = s;
	store.held--;
	if (give_back)
		madvise(slot_data(s), PAGE_SIZE, MADV_DONTNEED);
}

static void drop(uint32_t s, int give_back)
{
	release(s, give_back);
	store.dropped++;
}

/* Drop account a's oldest pages until it has room for `more` pages
 * within its quota: 0, or -1 if it cannot. */
static int within_quota(uint32_t a, uint32_t more)
{
	struct account *x = account_of(a);
	if (more > x->quota)
		return -1;
	while (x->held > x->quota - more)
		drop(x->pages.oldest, 0);
	return 0;
}

/* A free slot for account a's new page, making room among a's own pages
 * when the arena is full; NIL if a holds none. */
static uint32_t new_slot(uint32_t a, uint64_t owner, uint64_t page)
{
	if (store.free_head == NIL) {
		if (account_of(a)->pages.oldest == NIL)
			return NIL;
		drop(account_of(a)->pages.oldest, 0);
	}
	uint32_t s = store.free_head, b = bucket_of(owner, page);
	store.free_head = store.slots[s].hash_next;
	store.slots[s].owner = owner;
	store.slots[s].page = page;
	store.slots[s].hash_next = store.buckets[b];
	store.buckets[b] = s;
	store.held++;
	return s;
}

int store_put(uint32_t a, uint64_t owner, uint64_t page, const uint8_t *data)
{
	uint32_t s = lookup(owner, page);
	/* A page new to a (or the owner's, written under its previous
	 * lease) must fit a's quota. */
	if ((s == NIL || store.slots[s].account != a) && within_quota(a, 1))
		return -1;
	if (s == NIL) {
		s = new_slot(a, owner, page);
		if (s == NIL)
			return -1;
	} else {
		list_unlink(&store.pages, 0, s);
		uncharge(s);
	}
	list_append(&store.pages, 0, s);
	charge(s, a);
	memcpy(slot_data(s), data, PAGE_SIZE);
	return 0;
}

const uint8_t *store_get(uint64_t owner, uint64_t page)
{
	uint32_t s = lookup(owner, page);
	return s == NIL ? NULL : slot_data(s);
}

int store_has_all(uint64_t owner, uint64_t page, uint32_t count)
{
	for (uint32_t i = 0; i < count; i++)
		if (lookup(owner, page + i) == NIL)
			return 0;
	return 1;
}

uint32_t store_delete(uint64_t owner, uint64_t page, uint32_t count)
{
	uint32_t deleted = 0;
	for (uint32_t i = 0; i < count; i++) {
		uint32_t s = lookup(owner, page + i);
		if (s != NIL) {
			release(s, 0);
			deleted++;
		}
	}
	return deleted;
}

uint32_t store_reclaim(uint32_t n)
{
	uint32_t done = 0;
	while (done < n && store.pages.oldest != NIL) {
		drop(store.pages.oldest, 1);
		done++;
	}
	return done;
}

void store_stat(struct store_stat *out)
{
	*out = (struct store_stat){ .held = store.held,
				    .max_pages = store.max_pages,
				    .dropped = store.dropped };
}

/* ---- accounts ---- */

static uint32_t new_account(void)
{
	if (store.free_account == NIL) {
		/* At most one per lease holding pages or connections. */
		uint32_t n = store.naccounts ? store.naccounts * 2 : 16;
		struct account *grown = realloc(store.accounts,
						n * sizeof(*grown));
		if (!grown)
			return NIL;
		for (uint32_t a = store.naccounts; a < n; a++) {
			grown[a].used = 0;
			grown[a].next_free = a + 1 < n ? a + 1 : NIL;
		}
		store.accounts = grown;
		store.free_account = store.naccounts;
		store.naccounts = n;
	}
	uint32_t a = store.free_account;
	store.free_account = account_of(a)->next_free;
	*account_of(a) = (struct account){
		.used = 1, .pages = { NIL, NIL }, .next_free = NIL };
	return a;
}

static uint32_t capped(uint64_t quota)
{
	return quota < store.max_pages ? (uint32_t)quota : store.max_pages;
}

uint32_t store_open_account(const uint8_t lease[16], uint64_t owner,
			    uint64_t quota, uint64_t issued_at,
			    uint64_t expires_at)
{
	for (uint32_t a = 0; a < store.naccounts; a++) {
		struct account *x = account_of(a);
		if (!x->used || x->any_owner || memcmp(x->lease, lease, 16))
			continue;
		if (x->owner != owner || x->revoked)
			return NIL;
		/* Any good token of the lease says it lives that long;
		 * the newest sets its quota. */
		if (expires_at > x->expires_at)
			x->expires_at = expires_at;
		if (issued_at > x->issued_at) {
			x->issued_at = issued_at;
			x->quota = capped(quota);
			within_quota(a, 0);
		}
		return a;
	}
	uint32_t a = new_account();
	if (a == NIL)
		return NIL;
	struct account *x = account_of(a);
	memcpy(x->lease, lease, 16);
	x->owner = owner;
	x->issued_at = issued_at;
	x->expires_at = expires_at;
	x->quota = capped(quota);
	return a;
}

/* Drop every page of account a and give its memory back. */
static uint32_t drop_account(uint32_t a)
{
	uint32_t n = 0;
	store.accounts[a].attached++; /* not forgotten meanwhile */
	while (account_of(a)->pages.oldest != NIL) {
		drop(account_of(a)->pages.oldest, 1);
		n++;
	}
	store.accounts[a].attached--;
	maybe_forget(a);
	return n;
}

uint32_t store_revoke(uint64_t owner, uint64_t revoked_at)
{
	uint32_t n = 0;
	for (uint32_t a = 0; a < store.naccounts; a++) {
		struct account *x = account_of(a);
		if (x->used && !x->any_owner && x->owner == owner &&
		    x->issued_at <= revoked_at) {
			x->revoked = 1;
			n += drop_account(a);
		}
	}
	return n;
}

uint32_t store_reclaim_orphans(uint64_t now, uint64_t grace)
{
	uint32_t n = 0;
	for (uint32_t a = 0; a < store.naccounts; a++) {
		struct account *x = account_of(a);
		if (x->used && !x->any_owner && !x->attached && x->held &&
		    now >= x->expires_at && now - x->expires_at >= grace)
			n += drop_account(a);
	}
	return n;
}

int store_usable(uint32_t a, uint64_t now)
{
	struct account *x = account_of(a);
	return x->any_owner || (!x->revoked && now < x->expires_at);
}

uint32_t store_open_shared_account(void)
{
	uint32_t a = new_account();
	if (a != NIL) {
		account_of(a)->any_owner = 1;
		account_of(a)->quota = store.max_pages;
	}
	return a;
}

void store_attach(uint32_t a)
{
	account_of(a)->attached++;
}

void store_detach(uint32_t a)
{
	account_of(a)->attached--;
	maybe_forget(a);
}

uint32_t store_attached(uint32_t a)
{
	return account_of(a)->attached;
}

uint32_t store_quota(uint32_t a)
{
	return account_of(a)->quota;
}

int store_init(uint32_t max_pages)
{
	uint32_t buckets = 1;
	while (buckets < max_pages && buckets < (1u << 31))
		buckets <<= 1;
	store.max_pages = max_pages;
	store.bucket_mask = buckets - 1;
	/* Untouched arena pages cost nothing until a PUT writes them. */
	store.arena = mmap(NULL, (size_t)max_pages * PAGE_SIZE,
			   PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	store.slots = calloc(max_pages, sizeof(*store.slots));
	store.buckets = malloc((size_t)buckets * sizeof(*store.buckets));
	if (store.arena == MAP_FAILED || !store.slots || !store.buckets)
		return -1;
	memset(store.buckets, 0xff, (size_t)buckets * sizeof(*store.buckets));
	for (uint32_t s = 0; s < max_pages; s++)
		store.slots[s].hash_next = s + 1 < max_pages ? s + 1 : NIL;
	store.free_head = 0;
	store.pages = (struct list){ NIL, NIL };
	store.free_account = NIL;
	return 0;
}
