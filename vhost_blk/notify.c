// SPDX-License-Identifier: GPL-2.0
/*
 * vhost_blk: interrupt moderation, when a queue tells the guest that
 * requests completed.
 *
 * Every interrupt costs the guest VM exits (the interrupt's delivery, its
 * end of interrupt, often a wakeup from HLT).  A queue with many requests
 * in flight gets their completions in several runs of its completion
 * work, each of which would interrupt the guest.  With irq_delay_us set, a
 * run that leaves more requests in flight than the guest has not yet been
 * told about holds the interrupt: the guest learns of what completed with
 * a later run's interrupt, once at least half of what was outstanding has
 * completed (or nothing is left in flight), and at the latest when
 * irq_delay_us has passed since the interrupt was first held.  So a guest
 * keeps more than half of its queue depth at the device, and a queue at
 * depth one (or two) is never held up.  An interrupt the guest does not
 * want (it has them off, or its used_event index is not reached) is not
 * held: holding it would gain nothing and cost a timer.
 */
#include <linux/hrtimer.h>
#include <linux/moduleparam.h>

#include "blk.h"

unsigned int vhost_blk_irq_delay_us;
module_param_named(irq_delay_us, vhost_blk_irq_delay_us, uint, 0644);
MODULE_PARM_DESC(irq_delay_us,
		 "Longest a queue holds the guest's interrupt while more requests are in flight than completed unannounced (us, 0 = off, default 0; new devices)");

static enum hrtimer_restart vhost_blk_irq_timeout(struct hrtimer *timer)
{
	struct vhost_blk_vq *bvq = container_of(timer, struct vhost_blk_vq,
						irq_timer);

	WRITE_ONCE(bvq->irq_expired, true);
	/* If the worker is gone, the queue is being torn down. */
	vhost_vq_work_queue(&bvq->vq, &bvq->done_work);
	return HRTIMER_NORESTART;
}

void vhost_blk_irq_init(struct vhost_blk_vq *bvq)
{
	hrtimer_setup(&bvq->irq_timer, vhost_blk_irq_timeout, CLOCK_MONOTONIC,
		      HRTIMER_MODE_REL);
}

/*
 * Nothing held any more (teardown, every request completed).  The timer
 * goes after vq.mutex is dropped: a completion work still retiring (its
 * status writes may fault and sleep) holds the mutex and may arm it, but
 * then it has run by now, and any later run retires everything, leaving
 * nothing in flight to hold the interrupt for.
 */
void vhost_blk_irq_stop(struct vhost_blk_vq *bvq)
{
	mutex_lock(&bvq->vq.mutex);
	bvq->irq_held = false;
	bvq->irq_unsent = 0;
	WRITE_ONCE(bvq->irq_expired, false);
	mutex_unlock(&bvq->vq.mutex);
	hrtimer_cancel(&bvq->irq_timer);
}

static void vhost_blk_irq_release(struct vhost_blk_vq *bvq)
{
	if (bvq->irq_held) {
		hrtimer_try_to_cancel(&bvq->irq_timer);
		bvq->irq_held = false;
	}
	WRITE_ONCE(bvq->irq_expired, false);
	bvq->irq_unsent = 0;
}

/*
 * @n completions were just added to the used ring (0: the completion work
 * ran for the timer alone): true if the guest's interrupt waits.  Under
 * vq.mutex.
 */
bool vhost_blk_irq_hold(struct vhost_blk_vq *bvq, unsigned int n)
{
	u32 us = READ_ONCE(bvq->blk->irq_delay_us);

	if (bvq->irq_held && READ_ONCE(bvq->irq_expired)) {
		bvq->stats.irq_timeouts++;
		vhost_blk_irq_release(bvq);
		return false;
	}
	if (!n)
		return true;
	bvq->irq_unsent += n;
	if (!us || bvq->irq_unsent >= bvq->inflight ||
	    !vhost_vq_wants_signal(&bvq->vq)) {
		vhost_blk_irq_release(bvq);
		return false;
	}
	if (!bvq->irq_held) {
		bvq->irq_held = true;
		WRITE_ONCE(bvq->irq_expired, false);
		hrtimer_start(&bvq->irq_timer,
			      ns_to_ktime((u64)us * NSEC_PER_USEC),
			      HRTIMER_MODE_REL);
	}
	bvq->stats.irq_held++;
	return true;
}
