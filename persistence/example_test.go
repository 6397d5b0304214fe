package persistence_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"

	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// Example opens a store, creates a Session, admits a prompt (and retries
// the admission, as a client that lost the answer would), then reads the
// Session's history and follows its log.
func Example() {
	dir, err := os.MkdirTemp("", "sessiond-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	// The zero Options are the production settings: fsync on, no logger.
	st, err := persistence.Open(filepath.Join(dir, "sessiond.db"), persistence.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	ctx := context.Background()

	// A Location's directory must be absolute; the store does not look at it.
	s, created, err := st.CreateSession(ctx, persistence.CreateSession{
		Location: messages.Location{Directory: dir},
		Title:    "example",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("created:", created, "lastSeq:", s.LastSeq)

	// A client that picks the message ID itself may retry the admission
	// as often as it likes: the same ID, Session and prompt return the
	// same receipt, and nothing is admitted twice.
	id := messages.NewIDs(nil, nil).Message()
	req := persistence.Admission{ID: id, SessionID: s.ID, Prompt: messages.Prompt{Text: "hello"}}
	first, created, err := st.Admit(ctx, req)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("admitted:", created, first.AdmittedSeq, first.Delivery)
	again, created, err := st.Admit(ctx, req)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("retried:", created, reflect.DeepEqual(again, first))

	// The same ID with another prompt is a conflict, not a new admission.
	_, _, err = st.Admit(ctx, persistence.Admission{ID: id, SessionID: s.ID, Prompt: messages.Prompt{Text: "bye"}})
	fmt.Println("reused ID:", messages.AsError(err, messages.ErrUnknown).Type)

	// History pages the durable events after a seq: -1 starts before
	// session.created.1, which is seq 0.
	page, err := st.History(ctx, s.ID, persistence.Query{After: -1})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, ev := range page.Data {
		fmt.Println("history:", ev.Seq(), ev.Type)
	}

	// Log replays the same events, then one Synced marker; with follow it
	// would then wait for new commits until ctx ends, so a reader that
	// only wants the backlog stops at the marker.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for item, err := range st.Log(ctx, s.ID, -1, true) {
		if err != nil {
			fmt.Println(err)
			return
		}
		if item.Synced != nil {
			fmt.Println("log:", item.Synced.Type, *item.Synced.Seq)
			break
		}
		fmt.Println("log:", item.Event.Seq(), item.Event.Type)
	}
	// Output:
	// created: true lastSeq: 0
	// admitted: true 1 steer
	// retried: false true
	// reused ID: prompt.conflict
	// history: 0 session.created.1
	// history: 1 session.prompt.admitted.1
	// log: 0 session.created.1
	// log: 1 session.prompt.admitted.1
	// log: log.synced 1
}

// ExampleBolt_Log follows a Session's log: the replay, the Synced marker,
// then a commit made while the reader waits.
func ExampleBolt_Log() {
	dir, err := os.MkdirTemp("", "sessiond-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	st, err := persistence.Open(filepath.Join(dir, "sessiond.db"), persistence.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, _, err := st.CreateSession(ctx, persistence.CreateSession{Location: messages.Location{Directory: dir}})
	if err != nil {
		fmt.Println(err)
		return
	}

	for item, err := range st.Log(ctx, s.ID, -1, true) {
		if err != nil {
			fmt.Println(err)
			return
		}
		switch {
		case item.Synced != nil:
			fmt.Println(item.Synced.Type)
			// Append commits events with their projections; a reader may
			// write while it follows the log.
			evs, err := st.Append(ctx, s.ID, &messages.AgentSelected{SessionID: s.ID, Agent: "plan"})
			if err != nil {
				fmt.Println(err)
				return
			}
			fmt.Println("appended", evs[0].Seq())
		case item.Event.Type == messages.TypeAgentSelected:
			fmt.Println(item.Event.Seq(), item.Event.Type, item.Event.Data.(*messages.AgentSelected).Agent)
			cancel() // the follow ends when ctx does
		default:
			fmt.Println(item.Event.Seq(), item.Event.Type)
		}
	}
	got, err := st.Get(context.Background(), s.ID)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("agent:", got.Agent, "lastSeq:", got.LastSeq)
	// Output:
	// 0 session.created.1
	// log.synced
	// appended 1
	// 1 session.agent.selected.1 plan
	// agent: plan lastSeq: 1
}

// ExampleBolt_Backup copies a running store and opens the copy as a store
// of its own.
func ExampleBolt_Backup() {
	dir, err := os.MkdirTemp("", "sessiond-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	st, err := persistence.Open(filepath.Join(dir, "sessiond.db"), persistence.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	s, _, err := st.CreateSession(ctx, persistence.CreateSession{Location: messages.Location{Directory: dir}, Title: "kept"})
	if err != nil {
		fmt.Println(err)
		return
	}

	// The copy holds every commit durable when Backup starts; writes go
	// on meanwhile. Closing it removes its temporary file.
	copied, size, err := st.Backup(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer copied.Close()
	// Restore it alone into a data directory, under the store's name.
	restored := filepath.Join(dir, "restored")
	if err := os.Mkdir(restored, 0o700); err != nil {
		fmt.Println(err)
		return
	}
	f, err := os.Create(filepath.Join(restored, "sessiond.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	n, err := io.Copy(f, copied)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("copied all:", n == size)

	st2, err := persistence.Open(filepath.Join(restored, "sessiond.db"), persistence.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st2.Close()
	got, err := st2.Get(ctx, s.ID)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("restored:", got.Title, got.LastSeq)
	// Output:
	// copied all: true
	// restored: kept 0
}
