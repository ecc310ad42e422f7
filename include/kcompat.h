/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Compatibility shims between the supported kernels (6.1 LTS and 6.12 LTS).
 * Every version test of the project lives in this header.
 */
#ifndef _VHOST_BLK_KCOMPAT_H
#define _VHOST_BLK_KCOMPAT_H

#include <linux/version.h>

#endif /* _VHOST_BLK_KCOMPAT_H */
