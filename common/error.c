#include "error.h"

#include <stdarg.h>
#include <stdio.h>

void st_err_format(st_err *err, const char *fmt, ...) {
  if (!err) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->msg, sizeof err->msg, fmt, ap);
  va_end(ap);
}

const char *st_status_name(st_status status) {
  switch (status) {
  case ST_OK: return "ST_OK";
  case ST_ERR_INVALID_ARG: return "ST_ERR_INVALID_ARG";
  case ST_ERR_NO_DRIVER: return "ST_ERR_NO_DRIVER";
  case ST_ERR_NO_DEVICE: return "ST_ERR_NO_DEVICE";
  case ST_ERR_CUDA: return "ST_ERR_CUDA";
  case ST_ERR_DB: return "ST_ERR_DB";
  case ST_ERR_NO_VARIANT: return "ST_ERR_NO_VARIANT";
  case ST_ERR_WORKSPACE: return "ST_ERR_WORKSPACE";
  case ST_ERR_NOMEM: return "ST_ERR_NOMEM";
  case ST_ERR_UNSUPPORTED: return "ST_ERR_UNSUPPORTED";
  }
  return "ST_ERR_UNKNOWN";
}
