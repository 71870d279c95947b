package sim

import (
	"errors"
	"time"
)

// ErrLost is returned, with the report, by a run in which a message was lost:
// put, never deleted nor set aside as poison, not expired, and yet not in
// the queue at the end; or in which the queue did something its semantics
// forbid, such as delivering a message after its deletion.
var ErrLost = errors.New("sim: messages lost or semantics violated")

// Report is the outcome of a run. Durations are in seconds.
type Report struct {
	Name        string    `json:"name"`
	Description string    `json:"description,omitempty"`
	Seed        uint64    `json:"seed"`
	Start       time.Time `json:"start"`
	Duration    Duration  `json:"duration"`
	// Parameter and Value name the swept parameter of a sweep's run.
	Parameter string `json:"parameter,omitempty"`
	Value     string `json:"value,omitempty"`

	Messages     Messages     `json:"messages"`
	Latency      Latency      `json:"latency"`
	Throughput   float64      `json:"throughput"` // messages completed per second
	Transactions Transactions `json:"transactions"`
	Queue        QueueStats   `json:"queue"`
	Fleets       []FleetStats `json:"fleets"`
	// Violations lists what went wrong, if anything: lost messages and
	// breaches of the queue's semantics. Empty in a good run.
	Violations []string `json:"violations"`

	// Series is the time series, one sample per Scenario.Sample.
	Series []Sample `json:"-"`
	// Histogram is the latency histogram: bucket middles in seconds and
	// counts.
	Histogram []HistogramBin `json:"-"`
}

// Messages counts what happened to messages.
type Messages struct {
	// Put is the number of messages put.
	Put int64 `json:"put"`
	// Deliveries is the number of times a Get returned a message; every
	// delivery beyond a message's first is a Duplicate.
	Deliveries int64 `json:"deliveries"`
	Duplicates int64 `json:"duplicates"`
	// Completed messages were processed and deleted. ProcessedAgain counts
	// successful processings of a message that had already been processed
	// once: the work that a duplicate delivery wasted. StaleDeletes are
	// deletes refused because another consumer had taken the message in
	// the meantime (MessageNotFound).
	Completed      int64 `json:"completed"`
	ProcessedAgain int64 `json:"processedAgain"`
	StaleDeletes   int64 `json:"staleDeletes"`
	// Failed counts failed processing attempts; Poisoned the messages set
	// aside in the poison queue.
	Failed   int64 `json:"failed"`
	Poisoned int64 `json:"poisoned"`
	// Expired messages reached their time-to-live before they were
	// completed.
	Expired int64 `json:"expired"`
	// InQueue is the number of messages left in the queue at the end.
	// InFlight is the number that consumers held then, some of which
	// another consumer may have taken since their lease lapsed.
	InQueue  int64 `json:"inQueue"`
	InFlight int64 `json:"inFlight"`
	// Lost must be zero: messages put and neither completed, poisoned,
	// expired nor still in the queue.
	Lost int64 `json:"lost"`
	// Crashes counts consumer crashes.
	Crashes int64 `json:"crashes"`
}

// Latency summarises end-to-end latency, from Put to the successful delete.
type Latency struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

// The billable operations.
const (
	OpPut = iota
	OpGet
	OpUpdate
	OpDelete
	OpPeek
	OpMetadata
	numOps
)

// OpNames names the billable operations, in order.
var OpNames = [numOps]string{"Put", "Get", "Update", "Delete", "Peek", "Metadata"}

// Transactions counts billable storage transactions by operation: every
// request counts, whether it succeeds or not, and a Get counts once however
// many messages it returns, or none (EmptyGets, included in Get). Metadata
// is Get Queue Metadata, which the autoscaler reads the depth with.
type Transactions struct {
	Count     [numOps]int64 `json:"count"`
	EmptyGets int64         `json:"emptyGets"`
	Total     int64         `json:"total"`
	Cost      float64       `json:"cost"`
	Currency  string        `json:"currency"`
	// PerTenThousand is the price the cost was computed with.
	PerTenThousand float64 `json:"perTenThousand"`
}

// QueueStats summarises the queue's depth over the run.
type QueueStats struct {
	MaxDepth    int64   `json:"maxDepth"`
	MeanDepth   float64 `json:"meanDepth"`
	MaxInFlight int64   `json:"maxInFlight"`
}

// FleetStats is one fleet's share.
type FleetStats struct {
	Name  string `json:"name"`
	Model string `json:"model"`
	// MaxConsumers is the most consumers running at once.
	MaxConsumers int `json:"maxConsumers"`
	// ConsumerHours is the time consumers ran (were up), added up.
	ConsumerHours float64 `json:"consumerHours"`
	// Utilisation is the share of that time spent processing.
	Utilisation float64 `json:"utilisation"`
	Deliveries  int64   `json:"deliveries"`
	Completed   int64   `json:"completed"`
	EmptyGets   int64   `json:"emptyGets"`
	Crashes     int64   `json:"crashes"`
}

// Sample is one point of the time series: the state at time T and what
// happened in the interval that ended then.
type Sample struct {
	T         float64 `json:"t"` // seconds from the start
	Depth     int64   `json:"depth"`
	InFlight  int64   `json:"inFlight"`
	Consumers int64   `json:"consumers"`
	Busy      int64   `json:"busy"`
	// In the interval:
	Put        int64         `json:"put"`
	Completed  int64         `json:"completed"`
	Duplicates int64         `json:"duplicates"`
	Expired    int64         `json:"expired"`
	EmptyGets  int64         `json:"emptyGets"`
	Ops        [numOps]int64 `json:"ops"`
	LatencyP50 float64       `json:"latencyP50"`
	LatencyP99 float64       `json:"latencyP99"`
	LatencyMax float64       `json:"latencyMax"`
}

// HistogramBin is one bucket of the latency histogram.
type HistogramBin struct {
	Seconds float64 `json:"seconds"`
	Count   uint64  `json:"count"`
}
