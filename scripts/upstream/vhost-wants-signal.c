// SPDX-License-Identifier: GPL-2.0 (this line is not copied: scripts/upstream.sh)

/**
 * vhost_vq_wants_signal() - would vhost_signal() interrupt the guest now
 * @vq: the virtqueue, with its mutex held
 *
 * The guest's request for an interrupt as it reads at this moment, without
 * the barrier vhost_signal() takes and without recording a signal: for a
 * device deciding whether to hold an interrupt back. A stale answer only
 * moves the interrupt; vhost_signal() still decides whether it is sent.
 *
 * Return: true if the guest wants to be interrupted (or its ring cannot be
 * read), false if it has interrupts off or its used_event is not reached.
 */
bool vhost_vq_wants_signal(struct vhost_virtqueue *vq)
{
	__virtio16 val;

	if (!vhost_has_feature(vq, VIRTIO_RING_F_EVENT_IDX)) {
		if (vhost_get_avail_flags(vq, &val))
			return true;
		return !(val & cpu_to_vhost16(vq, VRING_AVAIL_F_NO_INTERRUPT));
	}
	if (!vq->signalled_used_valid || vhost_get_used_event(vq, &val))
		return true;
	return vring_need_event(vhost16_to_cpu(vq, val), vq->last_used_idx,
				vq->signalled_used);
}
EXPORT_SYMBOL_GPL(vhost_vq_wants_signal);
