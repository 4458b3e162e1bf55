/*
 * kcap_cap.h — what `kcap record` and `kcap arm` (capture/kcap_cmd_*.c) use of capture: the
 * KCAP_* parsers, the arm control file's name and the capture directory rule. libkcap.so's own files include the one
 * header of each module they call instead.
 */
#ifndef KCAP_CAP_H
#define KCAP_CAP_H

#include "kcap_arm.h"
#include "kcap_config.h"
#include "kcap_snapshot.h" /* formats/: kcap_mkdir_private */

#endif
