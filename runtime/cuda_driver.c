#include "cuda_driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static st_cu g_cu;
static st_status g_status = ST_ERR_NO_DRIVER;
static st_err g_err;

typedef CUresult (*get_proc_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

static void load_once(void) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *why = dlerror();
    g_status = st_fail(&g_err, ST_ERR_NO_DRIVER,
                       "no CUDA driver on this machine: dlopen(libcuda.so.1) failed: %s",
                       why ? why : "unknown reason");
    return;
  }
  get_proc_fn get_proc = (get_proc_fn)dlsym(lib, "cuGetProcAddress_v2");
  CUresult (*init)(unsigned int) = (CUresult(*)(unsigned int))dlsym(lib, "cuInit");
  CUresult (*version)(int *) = (CUresult(*)(int *))dlsym(lib, "cuDriverGetVersion");
  if (!get_proc || !init || !version) {
    g_status = st_fail(&g_err, ST_ERR_NO_DRIVER,
                       "the CUDA driver libcuda.so.1 is too old: cuGetProcAddress_v2 is missing "
                       "(CUDA 12.0 or newer is needed)");
    return;
  }
  int drv = 0;
  if (version(&drv) != CUDA_SUCCESS || drv < 12000) {
    g_status = st_fail(&g_err, ST_ERR_NO_DRIVER,
                       "the CUDA driver reports version %d; CUDA 12.0 (12000) or newer is needed", drv);
    return;
  }
  int want = drv < CUDA_VERSION ? drv : CUDA_VERSION;
#define ST_CU_RESOLVE(name)                                                                     \
  {                                                                                             \
    void *p = NULL;                                                                             \
    CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;                    \
    if (get_proc(#name, &p, want, CU_GET_PROC_ADDRESS_DEFAULT, &q) != CUDA_SUCCESS || !p) {      \
      g_status = st_fail(&g_err, ST_ERR_NO_DRIVER,                                               \
                         "the CUDA driver (version %d) lacks %s for CUDA %d", drv, #name, want); \
      return;                                                                                   \
    }                                                                                           \
    memcpy(&g_cu.name, &p, sizeof p);                                                           \
  }
  ST_CU_FUNCS(ST_CU_RESOLVE)
#undef ST_CU_RESOLVE
  g_cu.driver_version = drv;
  CUresult rc = init(0);
  if (rc == CUDA_ERROR_NO_DEVICE) {
    g_status = st_fail(&g_err, ST_ERR_NO_DEVICE, "the CUDA driver found no GPU (cuInit: CUDA_ERROR_NO_DEVICE)");
    return;
  }
  if (rc != CUDA_SUCCESS) {
    g_status = st_cu_fail(&g_cu, rc, "cuInit", &g_err);
    return;
  }
  int count = 0;
  if (g_cu.cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
    g_status = st_fail(&g_err, ST_ERR_NO_DEVICE, "the CUDA driver loaded but reports no GPU");
    return;
  }
  g_status = ST_OK;
  /* The library stays loaded for the life of the process: the table points into it. */
}

st_status st_cu_load(const st_cu **out, st_err *err) {
  pthread_once(&g_once, load_once);
  if (g_status != ST_OK) {
    if (err) *err = g_err;
    return g_status;
  }
  *out = &g_cu;
  return ST_OK;
}

st_status st_cu_fail(const st_cu *cu, CUresult rc, const char *what, st_err *err) {
  const char *name = NULL, *text = NULL;
  if (cu && cu->cuGetErrorName) cu->cuGetErrorName(rc, &name);
  if (cu && cu->cuGetErrorString) cu->cuGetErrorString(rc, &text);
  char call[96];
  snprintf(call, sizeof call, "%s", what);
  char *paren = strchr(call, '(');
  if (paren) *paren = '\0'; /* "cu->cuMemAlloc(&p, n)" -> "cu->cuMemAlloc" */
  const char *fn = strstr(call, "cu->") == call ? call + 4 : call;
  return st_fail(err, ST_ERR_CUDA, "%s failed: %s (%s)", fn, name ? name : "unknown CUDA error",
                 text ? text : "no description");
}

st_status st_cu_device_info(const st_cu *cu, int ordinal, st_device_info *info, st_err *err) {
  int count = 0;
  ST_CU_TRY(cu, cu->cuDeviceGetCount(&count), err);
  if (ordinal < 0 || ordinal >= count)
    return st_fail(err, ST_ERR_NO_DEVICE, "device ordinal %d does not exist (this machine has %d GPU%s)",
                   ordinal, count, count == 1 ? "" : "s");
  CUdevice dev;
  ST_CU_TRY(cu, cu->cuDeviceGet(&dev, ordinal), err);
  memset(info, 0, sizeof *info);
  ST_CU_TRY(cu, cu->cuDeviceGetName(info->name, (int)sizeof info->name, dev), err);
  ST_CU_TRY(cu, cu->cuDeviceGetAttribute(&info->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), err);
  ST_CU_TRY(cu, cu->cuDeviceGetAttribute(&info->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), err);
  ST_CU_TRY(cu, cu->cuDeviceGetAttribute(&info->sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev), err);
  int l2 = 0;
  ST_CU_TRY(cu, cu->cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev), err);
  info->l2_bytes = l2;
  size_t mem = 0;
  ST_CU_TRY(cu, cu->cuDeviceTotalMem(&mem, dev), err);
  info->mem_bytes = (int64_t)mem;
  CUuuid uuid;
  ST_CU_TRY(cu, cu->cuDeviceGetUuid(&uuid, dev), err);
  for (int i = 0; i < 16; i++) snprintf(info->uuid + 2 * i, 3, "%02x", (unsigned char)uuid.bytes[i]);
  snprintf(info->arch, sizeof info->arch, "sm_%d%d%s", info->cc_major, info->cc_minor,
           info->cc_major >= 9 ? "a" : "");
  info->driver_version = cu->driver_version;
  return ST_OK;
}
