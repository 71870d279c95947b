package sim

// event is an entry of the simulation's single event queue: something that
// happens at a simulated time. Events at the same time happen in the order
// they were scheduled (seq), which makes every run with the same seed the
// same.
type event struct {
	at   int64  // nanoseconds from the start of the run
	seq  uint64 // scheduling order, for ties
	id   int32  // whose event: a producer, a consumer, a fleet, a timer
	gen  uint32 // a consumer's generation when scheduled; stale if changed
	kind uint8
}

// The kinds of event.
const (
	evProducer  uint8 = iota // a producer's next arrival
	evListener               // a listener's next step
	evVisible                // messages may have become visible
	evSample                 // record a point of the time series
	evAutoscale              // a fleet's scaler reads the depth
	evTimer                  // a timer on the simulated clock (worker model)
	evHandler                // a worker-model handler finishes
	evCrash                  // a worker-model instance crashes
	evRestart                // a worker-model instance starts again
)

// eventHeap is a 4-ary min-heap of events by (at, seq). Four children per
// node halve the depth of a binary heap, and the events are small, so a
// node's children share a cache line or two.
type eventHeap struct {
	items []event
}

func (e *event) before(o *event) bool {
	return e.at < o.at || (e.at == o.at && e.seq < o.seq)
}

func (h *eventHeap) len() int { return len(h.items) }

func (h *eventHeap) push(ev event) {
	h.items = append(h.items, ev)
	it := h.items
	i := len(it) - 1
	for i > 0 {
		p := (i - 1) / 4
		if !it[i].before(&it[p]) {
			break
		}
		it[i], it[p] = it[p], it[i]
		i = p
	}
}

// min returns the earliest event; the heap must not be empty.
func (h *eventHeap) min() *event { return &h.items[0] }

func (h *eventHeap) pop() event {
	it := h.items
	top := it[0]
	last := len(it) - 1
	it[0] = it[last]
	it = it[:last]
	h.items = it
	n := len(it)
	i := 0
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m := c
		end := min(c+4, n)
		for j := c + 1; j < end; j++ {
			if it[j].before(&it[m]) {
				m = j
			}
		}
		if !it[m].before(&it[i]) {
			break
		}
		it[i], it[m] = it[m], it[i]
		i = m
	}
	return top
}
