#include "disk_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "identity.h"

/* File layout: magic, payload length (8 bytes, little-endian), the
 * payload's hash in hex, then the payload. */
static const char g_magic[8] = {'S', 'T', 'C', 'U', 'B', 'I', 'N', '1'};
#define HEADER_BYTES (sizeof g_magic + 8 + ST_HASH_HEX_LEN)
/* Larger files are not binaries of ours. */
#define MAX_PAYLOAD ((size_t)1 << 30)

void st_disk_cache_dir(char *buf, size_t cap) {
  buf[0] = '\0';
  const char *dir = getenv("SPARSETUNE_CACHE_DIR");
  if (dir && dir[0]) {
    if (strcmp(dir, "off") != 0) snprintf(buf, cap, "%s", dir);
    return;
  }
  const char *xdg = getenv("XDG_CACHE_HOME");
  if (xdg && xdg[0] == '/') { /* the XDG spec ignores relative values */
    snprintf(buf, cap, "%s/sparsetune", xdg);
    return;
  }
  const char *home = getenv("HOME");
  if (home && home[0]) snprintf(buf, cap, "%s/.cache/sparsetune", home);
}

void st_disk_cache_path(const char *dir, const char *source_hash, const char *arch, const char *compiler, char *buf,
                        size_t cap) {
  char tag[64];
  size_t j = 0;
  for (size_t i = 0; compiler[i] && j + 1 < sizeof tag; i++)
    tag[j++] = compiler[i] == ' ' || compiler[i] == '/' ? '-' : compiler[i]; /* "nvrtc 13.0" -> "nvrtc-13.0" */
  tag[j] = '\0';
  int n = snprintf(buf, cap, "%s/%s.%s.%s.cubin", dir, source_hash, arch, tag);
  if (n < 0 || (size_t)n >= cap) buf[0] = '\0';
}

static int read_all(int fd, void *buf, size_t n) {
  char *p = buf;
  while (n > 0) {
    ssize_t got = read(fd, p, n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return -1;
    p += got;
    n -= (size_t)got;
  }
  return 0;
}

static int write_all(int fd, const void *buf, size_t n) {
  const char *p = buf;
  while (n > 0) {
    ssize_t put = write(fd, p, n);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return -1;
    p += put;
    n -= (size_t)put;
  }
  return 0;
}

int st_disk_cache_read(const char *path, void **data, size_t *size) {
  *data = NULL;
  *size = 0;
  if (!path[0]) return 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return 0;
  unsigned char header[HEADER_BYTES];
  struct stat st;
  void *buf = NULL;
  int ok = 0;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size < HEADER_BYTES ||
      read_all(fd, header, sizeof header) != 0 || memcmp(header, g_magic, sizeof g_magic) != 0)
    goto done;
  uint64_t len = 0;
  for (int i = 7; i >= 0; i--) len = len << 8 | header[sizeof g_magic + (size_t)i];
  if (len == 0 || len > MAX_PAYLOAD || len != (uint64_t)st.st_size - HEADER_BYTES) goto done;
  if (!(buf = malloc((size_t)len)) || read_all(fd, buf, (size_t)len) != 0) goto done;
  char want[ST_HASH_HEX_LEN + 1], got[ST_HASH_HEX_LEN + 1];
  memcpy(want, header + sizeof g_magic + 8, ST_HASH_HEX_LEN);
  want[ST_HASH_HEX_LEN] = '\0';
  st_hash_hex(buf, (size_t)len, got);
  if (strcmp(want, got) != 0) goto done;
  *data = buf;
  *size = (size_t)len;
  buf = NULL;
  ok = 1;
done:
  free(buf);
  close(fd);
  return ok;
}

/* mkdir -p for the folder of `path`, private to the user. */
static int make_parents(const char *path) {
  char dir[4096];
  int n = snprintf(dir, sizeof dir, "%s", path);
  if (n < 0 || (size_t)n >= sizeof dir) return -1;
  char *slash = strrchr(dir, '/');
  if (!slash || slash == dir) return 0;
  *slash = '\0';
  for (char *p = dir + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  return mkdir(dir, 0700) != 0 && errno != EEXIST ? -1 : 0;
}

int st_disk_cache_write(const char *path, const void *data, size_t size) {
  if (!path[0] || size == 0 || size > MAX_PAYLOAD || make_parents(path) != 0) return -1;
  char tmp[4096 + 16];
  int n = snprintf(tmp, sizeof tmp, "%s.XXXXXX", path);
  if (n < 0 || (size_t)n >= sizeof tmp) return -1;
  int fd = mkstemp(tmp);
  if (fd < 0) return -1;
  unsigned char header[HEADER_BYTES];
  memcpy(header, g_magic, sizeof g_magic);
  uint64_t len = size;
  for (int i = 0; i < 8; i++) header[sizeof g_magic + (size_t)i] = (unsigned char)(len >> (8 * i));
  char hash[ST_HASH_HEX_LEN + 1];
  st_hash_hex(data, size, hash);
  memcpy(header + sizeof g_magic + 8, hash, ST_HASH_HEX_LEN);
  int ok = write_all(fd, header, sizeof header) == 0 && write_all(fd, data, size) == 0;
  ok = close(fd) == 0 && ok;
  if (ok && rename(tmp, path) == 0) return 0;
  unlink(tmp);
  return -1;
}
