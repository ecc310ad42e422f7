/* SPDX-License-Identifier: GPL-2.0 */
/*
 * vhost_blk tracepoints: one event when a request is fetched from the ring,
 * one when its status is written back.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM vhost_blk

#if !defined(_VHOST_BLK_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _VHOST_BLK_TRACE_H

#include <linux/tracepoint.h>

TRACE_EVENT(vhost_blk_submit,
	TP_PROTO(u16 queue, u32 type, u64 sector, u64 len),
	TP_ARGS(queue, type, sector, len),
	TP_STRUCT__entry(
		__field(u16, queue)
		__field(u32, type)
		__field(u64, sector)
		__field(u64, len)
	),
	TP_fast_assign(
		__entry->queue = queue;
		__entry->type = type;
		__entry->sector = sector;
		__entry->len = len;
	),
	TP_printk("queue=%u type=%u sector=%llu len=%llu",
		  __entry->queue, __entry->type, __entry->sector, __entry->len)
);

/*
 * latency_ns: from the fetch to the completion, 0 for a request fetched
 * while the event was off (the clock is read only while it is on).
 */
TRACE_EVENT(vhost_blk_complete,
	TP_PROTO(u16 queue, u32 type, u64 sector, u64 len, u8 status,
		 u64 latency_ns),
	TP_ARGS(queue, type, sector, len, status, latency_ns),
	TP_STRUCT__entry(
		__field(u16, queue)
		__field(u32, type)
		__field(u64, sector)
		__field(u64, len)
		__field(u8, status)
		__field(u64, latency_ns)
	),
	TP_fast_assign(
		__entry->queue = queue;
		__entry->type = type;
		__entry->sector = sector;
		__entry->len = len;
		__entry->status = status;
		__entry->latency_ns = latency_ns;
	),
	TP_printk("queue=%u type=%u sector=%llu len=%llu status=%u latency_ns=%llu",
		  __entry->queue, __entry->type, __entry->sector, __entry->len,
		  __entry->status, __entry->latency_ns)
);

#endif /* _VHOST_BLK_TRACE_H */

#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE trace
#include <trace/define_trace.h>
