/* device_info.h - what identifies a GPU model for tuning results. */
#ifndef ST_DEVICE_INFO_H
#define ST_DEVICE_INFO_H

#include <stdint.h>

typedef struct st_device_info {
  char name[128];      /* as the driver names it, "NVIDIA H100 80GB HBM3"   */
  char arch[16];       /* NVRTC target, "sm_90a" on Hopper                 */
  char uuid[40];       /* this card, as 32 hex digits                      */
  int cc_major, cc_minor;
  int sm_count;
  int64_t mem_bytes;
  int64_t l2_bytes;
  int driver_version;  /* cuDriverGetVersion, 13000 = 13.0               */
} st_device_info;

#endif
