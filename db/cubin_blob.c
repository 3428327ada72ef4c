/* cubin_blob.c - a cubin to and from the form it is stored in
 * (cubin_blob.h): as compiled, or "STZ1" + size + zlib stream. */
#include "cubin_blob.h"

#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

static const char g_magic[4] = {'S', 'T', 'Z', '1'};
_Static_assert(DB_CUBIN_HEADER_BYTES == sizeof g_magic + 8, "the header is the magic and the size");

/* zlib's default level. Over 317 real sm_90a cubins (25.9 MB) level 6
 * kept 31.5% of the bytes at 26 MB/s, level 9 30.9% at 3.3 MB/s: 2% less
 * for 8x the time, which `eval --leave-one-out` (an export a dispatch key)
 * would pay again and again. Inflating costs the same at any level. */
#define PACK_LEVEL 6

static void put_u64le(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64le(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

int db_cubin_is_packed(const void *blob, size_t n) {
  return blob && n >= DB_CUBIN_FAMILY_BYTES && memcmp(blob, g_magic, DB_CUBIN_FAMILY_BYTES) == 0;
}

st_status db_cubin_pack(const void *cubin, size_t n, void **blob, size_t *blob_n, const char *what, st_err *err) {
  *blob = NULL;
  *blob_n = 0;
  if (!cubin || n == 0 || n > DB_CUBIN_MAX_BYTES)
    return st_fail(err, ST_ERR_DB, "%s is %zu bytes: a cubin to compress has 1 to %zu", what, n,
                   (size_t)DB_CUBIN_MAX_BYTES);
  const uLong bound = compressBound((uLong)n);
  unsigned char *b = malloc(DB_CUBIN_HEADER_BYTES + (size_t)bound);
  if (!b) return st_fail(err, ST_ERR_NOMEM, "out of host memory compressing %s (%zu bytes)", what, n);
  memcpy(b, g_magic, sizeof g_magic);
  put_u64le(b + sizeof g_magic, (uint64_t)n);
  uLongf stream_n = bound;
  const int zrc = compress2(b + DB_CUBIN_HEADER_BYTES, &stream_n, cubin, (uLong)n, PACK_LEVEL);
  if (zrc != Z_OK) {
    free(b);
    return st_fail(err, zrc == Z_MEM_ERROR ? ST_ERR_NOMEM : ST_ERR_DB, "compressing %s failed (zlib: %s)", what,
                   zError(zrc));
  }
  *blob = b;
  *blob_n = DB_CUBIN_HEADER_BYTES + (size_t)stream_n;
  return ST_OK;
}

/* The header of a compressed blob: the size it records, checked. */
static st_status packed_size(const unsigned char *b, size_t n, size_t *size, const char *what, st_err *err) {
  if (n < DB_CUBIN_HEADER_BYTES)
    return st_fail(err, ST_ERR_DB, "%s is corrupt: a compressed cubin of %zu bytes, shorter than its %d-byte header",
                   what, n, DB_CUBIN_HEADER_BYTES);
  if (memcmp(b, g_magic, sizeof g_magic) != 0)
    return st_fail(err, ST_ERR_DB,
                   "%s is stored in format 'STZ' + byte 0x%02x ('%c'), which this version does not "
                   "read (it reads '%.4s')",
                   what, b[3], isprint(b[3]) ? b[3] : '?', g_magic);
  const uint64_t recorded = get_u64le(b + sizeof g_magic);
  if (recorded == 0 || recorded > DB_CUBIN_MAX_BYTES)
    return st_fail(err, ST_ERR_DB, "%s is corrupt: its header records a cubin of %llu bytes (1 to %zu expected)", what,
                   (unsigned long long)recorded, (size_t)DB_CUBIN_MAX_BYTES);
  *size = (size_t)recorded;
  return ST_OK;
}

/* Inflates exactly `size` bytes from the whole stream, or says why not. */
static st_status inflate_exact(const unsigned char *stream, size_t stream_n, size_t size, void **out, const char *what,
                               st_err *err) {
  unsigned char *c = malloc(size);
  if (!c) return st_fail(err, ST_ERR_NOMEM, "out of host memory inflating %s (%zu bytes)", what, size);
  uLongf got = (uLongf)size;
  uLong used = (uLong)stream_n;
  const int zrc = uncompress2(c, &got, stream, &used);
  st_status st = ST_OK;
  if (zrc == Z_BUF_ERROR)
    st = st_fail(err, ST_ERR_DB, "%s is corrupt: it inflates past the %zu bytes its header records", what, size);
  else if (zrc == Z_MEM_ERROR)
    st = st_fail(err, ST_ERR_NOMEM, "out of host memory inflating %s", what);
  else if (zrc != Z_OK)
    st = st_fail(err, ST_ERR_DB, "%s is corrupt: its zlib stream of %zu bytes is damaged or cut short (zlib: %s)", what,
                 stream_n, zError(zrc));
  else if ((size_t)got != size)
    st = st_fail(err, ST_ERR_DB, "%s is corrupt: it inflates to %zu bytes, not the %zu its header records", what,
                 (size_t)got, size);
  else if ((size_t)used != stream_n)
    st = st_fail(err, ST_ERR_DB, "%s is corrupt: %zu bytes follow the end of its zlib stream", what,
                 stream_n - (size_t)used);
  if (st != ST_OK) {
    free(c);
    return st;
  }
  *out = c;
  return ST_OK;
}

st_status db_cubin_unpack(const void *blob, size_t n, void **cubin, size_t *cubin_n, const char *what, st_err *err) {
  *cubin = NULL;
  *cubin_n = 0;
  if (!blob || n == 0) return st_fail(err, ST_ERR_DB, "%s is empty", what);
  if (!db_cubin_is_packed(blob, n)) {
    void *c = malloc(n);
    if (!c) return st_fail(err, ST_ERR_NOMEM, "out of host memory for %s (%zu bytes)", what, n);
    memcpy(c, blob, n);
    *cubin = c;
    *cubin_n = n;
    return ST_OK;
  }
  const unsigned char *b = blob;
  size_t size = 0;
  st_status st = packed_size(b, n, &size, what, err);
  if (st == ST_OK) st = inflate_exact(b + DB_CUBIN_HEADER_BYTES, n - DB_CUBIN_HEADER_BYTES, size, cubin, what, err);
  if (st == ST_OK) *cubin_n = size;
  return st;
}
