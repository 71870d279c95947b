package azq

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/azqlib/azq/internal/longrun"
)

// The crash harness. TestCrashRecovery runs this test binary again as a
// child (TestCrashChild, switched on by crashDirEnv) that puts, gets,
// updates and deletes messages and creates and deletes queues on a
// durable Service as fast as it can, and writes a line to stdout before
// each operation ("b…", the operation may be in flight) and after it
// returns successfully (the acknowledgement). The parent kills the child
// with SIGKILL at a random moment, opens the directory itself and checks
// the recovered state against what was acknowledged:
//
//   - every message acknowledged as put (or known from the previous
//     round) is there, unless its deletion or its queue's deletion was at
//     least begun;
//   - no message whose deletion was acknowledged is there;
//   - no queue whose deletion was acknowledged is there;
//   - a DequeueCount is never below the last acknowledged one;
//   - a message with no operation in flight has exactly the receipt last
//     acknowledged, and it works;
//   - unknown messages are no more than the Puts that were in flight.
//
// Then it closes the directory and starts the next round on it.
const (
	crashDirEnv  = "AZQ_CRASH_DIR"
	crashSeedEnv = "AZQ_CRASH_SEED"
)

var crashQueues = []string{"work0", "work1", "work2"}

func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("the child of TestCrashRecovery; runs only under it")
	}
	seed, _ := strconv.ParseUint(os.Getenv(crashSeedEnv), 10, 64)
	opts := []DurableOption{WithCheckpointBytes(32 << 10)}
	if seed%2 == 1 {
		opts = append(opts, WithSyncInterval(20*time.Millisecond))
	}
	s, err := Open(dir, opts...)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(3)
	}
	ctx := context.Background()
	var outMu sync.Mutex
	say := func(f string, a ...any) {
		// One write per line: a pipe keeps writes under 4 KiB whole.
		line := fmt.Sprintf(f+"\n", a...)
		outMu.Lock()
		os.Stdout.WriteString(line)
		outMu.Unlock()
	}
	fail := func(what string, err error) {
		say("error %s: %v", what, err)
		os.Exit(4)
	}
	for _, name := range crashQueues {
		say("bmkq %s", name)
		if _, _, err := s.CreateQueue(ctx, name, nil); err != nil {
			fail("create", err)
		}
		say("mkq %s", name)
	}
	say("ready")
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ { // producers
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for i := 0; ; i++ {
				name := crashQueues[rng.IntN(len(crashQueues))]
				q, _ := s.Queue(name)
				say("bput %s", name)
				m, err := q.Put(ctx, fmt.Sprintf("p%d-%d", w, i), &PutOptions{TimeToLive: NeverExpires})
				if err != nil {
					fail("put", err)
				}
				say("put %s %s %s", name, m.ID, m.PopReceipt)
			}
		}()
	}
	for w := 0; w < 2; w++ { // consumers
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(10+w)))
			for {
				name := crashQueues[rng.IntN(len(crashQueues))]
				q, _ := s.Queue(name)
				msgs, err := q.Get(ctx, 1+rng.IntN(4), time.Second)
				if err != nil {
					fail("get", err)
				}
				for _, m := range msgs {
					say("get %s %s %d %s", name, m.ID, m.DequeueCount, m.PopReceipt)
				}
				for _, m := range msgs {
					switch rng.IntN(4) {
					case 0: // abandon: it comes back after a second
					case 1:
						say("bupd %s %s", name, m.ID)
						c := "updated"
						r, err := q.Update(ctx, m.ID, m.PopReceipt, time.Duration(rng.IntN(2))*time.Second, &c)
						if err != nil {
							fail("update", err)
						}
						say("upd %s %s %s", name, m.ID, r.PopReceipt)
					default:
						say("bdel %s %s", name, m.ID)
						if err := q.Delete(ctx, m.ID, m.PopReceipt); err != nil {
							fail("delete", err)
						}
						say("del %s %s", name, m.ID)
					}
				}
			}
		}()
	}
	wg.Add(1)
	go func() { // queue churn
		defer wg.Done()
		for i := 0; ; i++ {
			name := fmt.Sprintf("scratch%d-%d", seed, i)
			say("bmkq %s", name)
			q, _, err := s.CreateQueue(ctx, name, map[string]string{"n": strconv.Itoa(i)})
			if err != nil {
				fail("create", err)
			}
			say("mkq %s", name)
			say("bput %s", name)
			m, err := q.Put(ctx, "scratch", &PutOptions{TimeToLive: NeverExpires})
			if err != nil {
				fail("put", err)
			}
			say("put %s %s %s", name, m.ID, m.PopReceipt)
			if i%2 == 0 {
				say("brmq %s", name)
				if err := s.DeleteQueue(ctx, name); err != nil {
					fail("delete queue", err)
				}
				say("rmq %s", name)
			}
		}
	}()
	wg.Wait()
}

// newerReceipt reports whether the receipt a was issued after b (or b is
// not known): each Get and Update of a message bumps its receipt's
// version.
func newerReceipt(a, b string) bool {
	ra, err := ParsePopReceipt(a)
	if err != nil {
		return false
	}
	rb, err := ParsePopReceipt(b)
	return err != nil || ra.version > rb.version
}

// crashMsg is the parent's knowledge of one message.
type crashMsg struct {
	queue     string
	deq       int64
	receipt   string
	pending   int  // operations begun and not acknowledged
	deleted   bool // deletion acknowledged
	mayBeGone bool
}

// TestCrashRecovery runs a few rounds of the harness;
// TestCrashRecoveryLong runs forty.
func TestCrashRecovery(t *testing.T) {
	crashRecovery(t, 5)
}

// TestCrashRecoveryLong is the long run of the crash harness.
func TestCrashRecoveryLong(t *testing.T) {
	longrun.Skip(t)
	crashRecovery(t, 40)
}

// crashRecovery runs the harness for the given number of rounds. Each
// round kills the child once it has reported a random number of
// acknowledgements (the kill lands while it goes on working), so that a
// round is the same amount of work however busy the machine is.
func crashRecovery(t *testing.T, rounds int) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	msgs := map[string]*crashMsg{} // by message ID
	queues := map[string]bool{}    // queues that must exist
	acks := 0
	for round := 0; round < rounds; round++ {
		cmd := exec.Command(exe, "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashSeedEnv+"="+strconv.FormatUint(seed+uint64(round), 10))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var lines []string
		done := make(chan struct{})
		ready := make(chan struct{})
		kill := make(chan struct{})
		killAfter := 20 + rng.IntN(400) // acknowledgements after "ready"
		go func() {
			defer close(done)
			sc := bufio.NewScanner(out)
			acked := -1 // counting from "ready"
			for sc.Scan() {
				l := sc.Text()
				switch {
				case l == "ready":
					close(ready)
					acked = 0
				case acked >= 0 && l != "" && l[0] != 'b' && !strings.HasPrefix(l, "error"):
					if acked++; acked == killAfter {
						close(kill)
					}
				}
				lines = append(lines, l)
			}
		}()
		// The limits below only turn a hang into a failure; correct runs
		// never come near them, however busy the machine.
		select {
		case <-ready:
		case <-done:
			cmd.Wait()
			t.Fatalf("round %d: the child ended before it was ready: %q", round, lines)
		case <-time.After(2 * time.Minute):
			cmd.Process.Kill()
			t.Fatalf("round %d: the child did not get ready", round)
		}
		select {
		case <-kill:
		case <-done:
		case <-time.After(2 * time.Minute):
			cmd.Process.Kill()
			t.Fatalf("round %d: the child made %d acknowledgements in two minutes", round, killAfter)
		}
		cmd.Process.Signal(syscall.SIGKILL)
		<-done
		cmd.Wait()

		inflightPuts := map[string]int{}
		pendingRmq := map[string]bool{}
		for i, l := range lines {
			f := strings.Fields(l)
			if len(f) == 0 {
				continue
			}
			last := i == len(lines)-1
			// The last line may be cut short by the kill: only whole
			// lines of known shape count.
			get := func(id string) *crashMsg {
				m := msgs[id]
				if m == nil {
					// Put, acknowledged, not yet reported when read.
					m = &crashMsg{queue: f[1]}
					msgs[id] = m
					inflightPuts[f[1]]--
				}
				return m
			}
			switch {
			case f[0] == "error":
				t.Fatalf("round %d: child: %s", round, l)
			case f[0] == "bput" && len(f) == 2:
				inflightPuts[f[1]]++
			case f[0] == "put" && len(f) == 4 && !last:
				// A consumer may report the message first.
				if msgs[f[2]] == nil {
					inflightPuts[f[1]]--
					msgs[f[2]] = &crashMsg{queue: f[1], receipt: f[3]}
				}
				acks++
			case f[0] == "get" && len(f) == 5 && !last:
				m := get(f[2])
				// An Update that made the message visible at once can be
				// acknowledged after another consumer's Get of it: the
				// receipt with the higher version is the later.
				if newerReceipt(f[4], m.receipt) {
					m.deq, _ = strconv.ParseInt(f[3], 10, 64)
					m.receipt = f[4]
				}
				acks++
			case f[0] == "bupd" && len(f) == 3, f[0] == "bdel" && len(f) == 3:
				m := get(f[2])
				m.pending++
				if f[0] == "bdel" {
					m.mayBeGone = true
				}
			case f[0] == "upd" && len(f) == 4 && !last:
				m := get(f[2])
				m.pending--
				if newerReceipt(f[3], m.receipt) {
					m.receipt = f[3]
				}
				acks++
			case f[0] == "del" && len(f) == 3 && !last:
				m := get(f[2])
				m.pending--
				m.deleted = true
				acks++
			case f[0] == "brmq" && len(f) == 2:
				pendingRmq[f[1]] = true
			case f[0] == "rmq" && len(f) == 2 && !last:
				delete(pendingRmq, f[1])
				queues[f[1]] = false
				acks++
			case f[0] == "mkq" && len(f) == 2 && !last:
				queues[f[1]] = true
				acks++
			}
		}

		s, err := Open(dir)
		if err != nil {
			t.Fatalf("round %d: reopening after the kill: %v", round, err)
		}
		ctx := context.Background()
		for name, want := range queues {
			_, err := s.Queue(name)
			switch {
			case want && err != nil && !pendingRmq[name]:
				t.Fatalf("round %d: acknowledged queue %s is missing", round, name)
			case !want && err == nil:
				t.Fatalf("round %d: queue %s, whose deletion was acknowledged, is back", round, name)
			}
		}
		// The recovered messages, with their receipts.
		type got struct {
			queue   string
			deq     int64
			receipt string
		}
		recovered := map[string]got{}
		s.mu.Lock()
		s.queues.Scan(func(name string, q *Queue) bool {
			q.mu.Lock()
			for slot := uint32(0); slot < q.store.next; slot++ {
				if n := q.store.at(slot); n.seq != 0 {
					recovered[n.id.String()] = got{name, int64(n.dequeues), newReceipt(slot, n.version, n.tag).String()}
				}
			}
			q.mu.Unlock()
			return true
		})
		s.mu.Unlock()
		unknown := map[string]int{}
		for id, r := range recovered {
			if _, ok := msgs[id]; !ok {
				unknown[r.queue]++
			}
		}
		for q, n := range unknown {
			if n > max(0, inflightPuts[q]) {
				t.Fatalf("round %d: %d unknown messages in %s, but only %d Puts were in flight", round, n, q, inflightPuts[q])
			}
		}
		checked := 0
		for id, m := range msgs {
			r, ok := recovered[id]
			qGone := !queues[m.queue]
			switch {
			case m.deleted && ok:
				t.Fatalf("round %d: message %s, whose deletion was acknowledged, is back", round, id)
			case m.deleted:
				delete(msgs, id)
			case !ok && (qGone || pendingRmq[m.queue] || m.mayBeGone && m.pending > 0):
				delete(msgs, id) // its deletion may have happened
			case !ok:
				t.Fatalf("round %d: acknowledged message %s of %s is missing", round, id, m.queue)
			case r.deq < m.deq:
				t.Fatalf("round %d: message %s: DequeueCount %d, below the acknowledged %d", round, id, r.deq, m.deq)
			case m.pending == 0 && r.deq == m.deq && r.receipt != m.receipt:
				t.Fatalf("round %d: message %s: receipt %s, want the acknowledged %s", round, id, r.receipt, m.receipt)
			default:
				if m.pending == 0 && r.deq == m.deq && checked < 5 {
					// The receipt must still work through the API.
					checked++
					q, _ := s.Queue(m.queue)
					pr, _ := ParsePopReceipt(m.receipt)
					mid, _ := ParseMessageID(id)
					if _, err := q.Update(ctx, mid, pr, time.Second, nil); err != nil {
						t.Fatalf("round %d: Update with the acknowledged receipt of %s: %v", round, id, err)
					}
				}
			}
		}
		// The recovered state (after the checks' Updates) is the next
		// round's starting point.
		s.mu.Lock()
		s.queues.Scan(func(name string, q *Queue) bool {
			queues[name] = true
			q.mu.Lock()
			for slot := uint32(0); slot < q.store.next; slot++ {
				if n := q.store.at(slot); n.seq != 0 {
					msgs[n.id.String()] = &crashMsg{queue: name, deq: int64(n.dequeues), receipt: newReceipt(slot, n.version, n.tag).String()}
				}
			}
			q.mu.Unlock()
			return true
		})
		s.mu.Unlock()
		for name := range queues {
			if _, err := s.Queue(name); err != nil {
				delete(queues, name)
			}
		}
		for id, m := range msgs {
			if _, ok := recovered[id]; !ok {
				delete(msgs, id)
			}
			_ = m
		}
		if err := s.Close(); err != nil {
			t.Fatalf("round %d: Close: %v", round, err)
		}
	}
	t.Logf("%d rounds, %d acknowledged operations checked", rounds, acks)
	if acks < 20*rounds {
		t.Fatalf("only %d acknowledgements in %d rounds: the harness did not exercise enough", acks, rounds)
	}
}
