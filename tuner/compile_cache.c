#include "compile_cache.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "disk_cache.h"
#include "sparsetune.h"

/* Payload: magic, ok and the four resource counts (int32 each), compile_ms
 * (the double's bits), then the log and the cubin, each as a uint64 length
 * and its bytes; integers little-endian. */
static const char g_magic[8] = {'S', 'T', 'R', 'O', 'W', '0', '0', '1'};
#define FIXED_BYTES (sizeof g_magic + 5 * 4 + 8)

void st_compile_cache_path(const char *dir, const char *source_hash, const char *arch, const char *compiler, char *buf,
                           size_t cap) {
  buf[0] = '\0';
  if (!dir[0]) return;
  /* The library's version fixes the compile options, as in the runtime's
   * binaries; the runtime's own files end in .cubin, these in .row. */
  char tagged[96];
  snprintf(tagged, sizeof tagged, "%s sparsetune %s", compiler, SPARSETUNE_VERSION_STRING);
  char cubin_path[4352];
  st_disk_cache_path(dir, source_hash, arch, tagged, cubin_path, sizeof cubin_path);
  const size_t n = strlen(cubin_path), ext = strlen(".cubin");
  if (n < ext || strcmp(cubin_path + n - ext, ".cubin") != 0) return;
  const int w = snprintf(buf, cap, "%.*s.row", (int)(n - ext), cubin_path);
  if (w < 0 || (size_t)w >= cap) buf[0] = '\0';
}

static void put_u64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static void put_i32(unsigned char *p, int v) {
  const uint32_t u = (uint32_t)v;
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(u >> (8 * i));
}

static int get_i32(const unsigned char *p) {
  uint32_t u = 0;
  for (int i = 3; i >= 0; i--) u = u << 8 | p[i];
  return (int)(int32_t)u;
}

int st_compile_cache_put(const char *path, const st_binary_row *b) {
  if (!path[0] || (b->ok && (!b->cubin || b->cubin_size == 0))) return -1;
  const size_t log_len = b->log ? strlen(b->log) : 0, cubin_len = b->cubin ? b->cubin_size : 0;
  const size_t size = FIXED_BYTES + 8 + log_len + 8 + cubin_len;
  unsigned char *buf = malloc(size);
  if (!buf) return -1;
  unsigned char *p = buf;
  memcpy(p, g_magic, sizeof g_magic);
  p += sizeof g_magic;
  const int ints[5] = {b->ok, b->registers, b->spill_bytes, b->shared_bytes, b->local_bytes};
  for (int i = 0; i < 5; i++, p += 4) put_i32(p, ints[i]);
  uint64_t bits;
  memcpy(&bits, &b->compile_ms, sizeof bits);
  put_u64(p, bits);
  p += 8;
  put_u64(p, log_len);
  p += 8;
  if (log_len) memcpy(p, b->log, log_len);
  p += log_len;
  put_u64(p, cubin_len);
  p += 8;
  if (cubin_len) memcpy(p, b->cubin, cubin_len);
  const int rc = st_disk_cache_write(path, buf, size);
  free(buf);
  return rc;
}

int st_compile_cache_get(const char *path, const char *source_hash, const char *arch, const char *compiler,
                         st_binary_row *out) {
  void *data = NULL;
  size_t size = 0;
  if (!st_disk_cache_read(path, &data, &size)) return 0;
  const unsigned char *p = data, *end = p + size;
  char *log = NULL;
  void *cubin = NULL;
  int ok = 0;
  if (size < FIXED_BYTES + 8 || memcmp(p, g_magic, sizeof g_magic) != 0) goto done;
  p += sizeof g_magic;
  int ints[5];
  for (int i = 0; i < 5; i++, p += 4) ints[i] = get_i32(p);
  uint64_t bits = get_u64(p);
  p += 8;
  double compile_ms;
  memcpy(&compile_ms, &bits, sizeof compile_ms);
  const uint64_t log_len = get_u64(p);
  p += 8;
  if (log_len > (uint64_t)(end - p) || (uint64_t)(end - p) - log_len < 8) goto done;
  if (!(log = malloc((size_t)log_len + 1))) goto done;
  memcpy(log, p, (size_t)log_len);
  log[log_len] = '\0';
  p += log_len;
  const uint64_t cubin_len = get_u64(p);
  p += 8;
  if (cubin_len != (uint64_t)(end - p)) goto done;
  /* ok is 0 or 1, and a good compile has a binary; counts are never negative. */
  if ((ints[0] != 0 && ints[0] != 1) || (ints[0] == 1 && cubin_len == 0)) goto done;
  if (ints[1] < 0 || ints[2] < 0 || ints[3] < 0 || ints[4] < 0 || !(compile_ms >= 0)) goto done;
  if (cubin_len && !(cubin = malloc((size_t)cubin_len))) goto done;
  if (cubin_len) memcpy(cubin, p, (size_t)cubin_len);

  memset(out, 0, sizeof *out);
  snprintf(out->source_hash, sizeof out->source_hash, "%s", source_hash);
  snprintf(out->arch, sizeof out->arch, "%s", arch);
  snprintf(out->compiler, sizeof out->compiler, "%s", compiler);
  out->ok = ints[0];
  out->registers = ints[1];
  out->spill_bytes = ints[2];
  out->shared_bytes = ints[3];
  out->local_bytes = ints[4];
  out->compile_ms = compile_ms;
  out->log = log;
  out->cubin = cubin;
  out->cubin_size = (size_t)cubin_len;
  log = NULL;
  cubin = NULL;
  ok = 1;
done:
  free(log);
  free(cubin);
  free(data);
  return ok;
}
