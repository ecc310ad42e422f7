// SPDX-License-Identifier: GPL-2.0
/*
 * vhost_blk statistics: /sys/kernel/debug/vhost-blk/<id>/stats, one line per
 * counter, summed over the device's queues, then per-queue lines.
 */
#include <linux/debugfs.h>
#include <linux/seq_file.h>

#include "blk.h"

static struct dentry *vhost_blk_debugfs_root;

#ifdef VHOST_BLK_FAULT_INJECTION
/*
 * /sys/kernel/debug/vhost-blk/fault_drop_flush (test builds only): when set,
 * FLUSH requests are acknowledged without syncing the backend.  Fault
 * injection for the durability test, which must show that dropped flushes
 * lose data.
 */
bool vhost_blk_fault_drop_flush;

/*
 * fault_retire_delay_ms: the completion work sleeps this long (at most
 * VHOST_BLK_FAULT_DELAY_MAX_MS) under vq->mutex before it retires what it
 * took, as a status write that faults and sleeps would, and again after it
 * dropped the mutex, as a busy worker would before its next work: the
 * teardown race test widens its windows with it.
 * fault_irq_timer_orphaned counts queues whose interrupt-moderation timer
 * was still queued after teardown stopped moderation (each a use after
 * free once the device is freed, in a build without this check, which
 * cancels it).
 */
u32 vhost_blk_fault_retire_delay_ms;
u32 vhost_blk_fault_irq_timer_orphaned;

/*
 * fault_bio_delay_ms: a direct bio waits this long (at most
 * VHOST_BLK_FAULT_DELAY_MAX_MS) between the page cache check and its
 * submission, so that a test can read the range into the page cache
 * meanwhile, as a buffered reader of the device may.
 */
u32 vhost_blk_fault_bio_delay_ms;

static void vhost_blk_faults_init(struct dentry *root)
{
	debugfs_create_bool("fault_drop_flush", 0600, root,
			    &vhost_blk_fault_drop_flush);
	debugfs_create_u32("fault_retire_delay_ms", 0600, root,
			   &vhost_blk_fault_retire_delay_ms);
	debugfs_create_u32("fault_irq_timer_orphaned", 0400, root,
			   &vhost_blk_fault_irq_timer_orphaned);
	debugfs_create_u32("fault_bio_delay_ms", 0600, root,
			   &vhost_blk_fault_bio_delay_ms);
}
#endif

static const char * const vhost_blk_op_names[VHOST_BLK_OP_NR] = {
	[VHOST_BLK_OP_IN]		= "in",
	[VHOST_BLK_OP_OUT]		= "out",
	[VHOST_BLK_OP_FLUSH]		= "flush",
	[VHOST_BLK_OP_GET_ID]		= "get_id",
	[VHOST_BLK_OP_DISCARD]		= "discard",
	[VHOST_BLK_OP_WRITE_ZEROES]	= "write_zeroes",
	[VHOST_BLK_OP_OTHER]		= "other",
};

static void vhost_blk_stats_sum(struct vhost_blk_qstats *sum,
				const struct vhost_blk_qstats *q)
{
	int i;

	for (i = 0; i < VHOST_BLK_OP_NR; i++) {
		sum->reqs[i] += READ_ONCE(q->reqs[i]);
		sum->bytes[i] += READ_ONCE(q->bytes[i]);
	}
	sum->ioerr += READ_ONCE(q->ioerr);
	sum->unsupp += READ_ONCE(q->unsupp);
	sum->bad_chain += READ_ONCE(q->bad_chain);
	sum->batches += READ_ONCE(q->batches);
	sum->throttled += READ_ONCE(q->throttled);
	sum->batch_waits += READ_ONCE(q->batch_waits);
	sum->batch_found += READ_ONCE(q->batch_found);
	sum->batch_looks += READ_ONCE(q->batch_looks);
	sum->batch_timeouts += READ_ONCE(q->batch_timeouts);
	sum->poll_found += READ_ONCE(q->poll_found);
	sum->bios += READ_ONCE(q->bios);
	sum->irq_held += READ_ONCE(q->irq_held);
	sum->irq_timeouts += READ_ONCE(q->irq_timeouts);
}

static int vhost_blk_stats_show(struct seq_file *m, void *v)
{
	struct vhost_blk *blk = m->private;
	struct vhost_blk_qstats sum = {};
	u64 total = 0;
	int i;

	for (i = 0; i < VHOST_BLK_MAX_QUEUES; i++)
		vhost_blk_stats_sum(&sum, &blk->vqs[i].stats);
	for (i = 0; i < VHOST_BLK_OP_NR; i++) {
		seq_printf(m, "%s_reqs %llu\n", vhost_blk_op_names[i],
			   sum.reqs[i]);
		seq_printf(m, "%s_bytes %llu\n", vhost_blk_op_names[i],
			   sum.bytes[i]);
		total += sum.reqs[i];
	}
	seq_printf(m, "reqs %llu\n", total);
	seq_printf(m, "ioerr %llu\n", sum.ioerr);
	seq_printf(m, "unsupp %llu\n", sum.unsupp);
	seq_printf(m, "bad_chain %llu\n", sum.bad_chain);
	seq_printf(m, "batches %llu\n", sum.batches);
	seq_printf(m, "throttled %llu\n", sum.throttled);
	seq_printf(m, "batch_delay_us %u\n", READ_ONCE(blk->batch_delay_us));
	seq_printf(m, "batch_waits %llu\n", sum.batch_waits);
	seq_printf(m, "batch_found %llu\n", sum.batch_found);
	seq_printf(m, "batch_looks %llu\n", sum.batch_looks);
	seq_printf(m, "batch_timeouts %llu\n", sum.batch_timeouts);
	seq_printf(m, "poll_found %llu\n", sum.poll_found);
	seq_printf(m, "bios %llu\n", sum.bios);
	seq_printf(m, "irq_delay_us %u\n", READ_ONCE(blk->irq_delay_us));
	seq_printf(m, "irq_held %llu\n", sum.irq_held);
	seq_printf(m, "irq_timeouts %llu\n", sum.irq_timeouts);
	seq_printf(m, "syncs %llu\n", READ_ONCE(blk->sync_gen));
	seq_printf(m, "in_flight %u\n", vhost_blk_pending(blk));
	for (i = 0; i < VHOST_BLK_MAX_QUEUES; i++) {
		struct vhost_blk_qstats q = {};
		u64 n = 0;
		int j;

		vhost_blk_stats_sum(&q, &blk->vqs[i].stats);
		for (j = 0; j < VHOST_BLK_OP_NR; j++)
			n += q.reqs[j];
		if (n)
			seq_printf(m, "queue%d_reqs %llu\n", i, n);
	}
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(vhost_blk_stats);

void vhost_blk_stats_init(void)
{
	vhost_blk_debugfs_root = debugfs_create_dir("vhost-blk", NULL);
#ifdef VHOST_BLK_FAULT_INJECTION
	vhost_blk_faults_init(vhost_blk_debugfs_root);
#endif
}

void vhost_blk_stats_exit(void)
{
	debugfs_remove_recursive(vhost_blk_debugfs_root);
}

void vhost_blk_stats_add(struct vhost_blk *blk)
{
	char name[16];

	snprintf(name, sizeof(name), "%u", blk->id);
	blk->debugfs = debugfs_create_dir(name, vhost_blk_debugfs_root);
	debugfs_create_file("stats", 0444, blk->debugfs, blk,
			    &vhost_blk_stats_fops);
}

void vhost_blk_stats_del(struct vhost_blk *blk)
{
	debugfs_remove_recursive(blk->debugfs);
}
