// SPDX-License-Identifier: GPL-2.0
/*
 * Test-only module for the VM harness self-test: loading it triggers one
 * WARN_ON(1), which the harness must report as a failure. Never installed.
 */
#include <linux/module.h>
#include <linux/bug.h>

static int __init harness_warn_init(void)
{
	WARN_ON(1);
	return 0;
}

static void __exit harness_warn_exit(void)
{
}

module_init(harness_warn_init);
module_exit(harness_warn_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("VM harness self-test: WARN_ON(1) at load");
