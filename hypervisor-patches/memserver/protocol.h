/*
 * memcanal-memserver's wire format (README.md): 32-byte requests, 16-byte
 * replies, all integers little-endian.
 */
#ifndef MEMSERVER_PROTOCOL_H
#define MEMSERVER_PROTOCOL_H

#include <endian.h>
#include <stdint.h>
#include <string.h>

#define PAGE_SIZE 4096u
#define MAGIC 0x534D434Du /* 'MCMS' */
#define REQUEST_SIZE 32
#define REPLY_SIZE 16
#define MAX_BATCH 1024u /* pages per PUT/GET/DELETE */

enum op {
	OP_PUT = 1, OP_GET = 2, OP_DELETE = 3, OP_STAT = 4, OP_RECLAIM = 5,
	OP_HELLO = 6, OP_REVOKE = 7,
};

enum status {
	ST_OK = 0, ST_MISSING = 1, ST_FULL = 2, ST_BAD_REQUEST = 3,
	ST_REFUSED = 4,
};

struct request {
	uint8_t op;
	uint64_t owner;
	uint64_t page;
	uint32_t count;
};

static inline uint32_t get_u32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return le32toh(v);
}

static inline uint64_t get_u64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return le64toh(v);
}

static inline void put_u32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, 4);
}

static inline void put_u64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, 8);
}

#endif
