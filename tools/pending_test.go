package tools

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sessiond/sessiond/messages"
)

// recorder records the live events a Pending publishes.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, s)
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

func newRecordedPending() (*Pending, *recorder, chan string) {
	rec := &recorder{}
	asked := make(chan string, 16)
	n := 0
	p := NewPending(PendingConfig{
		NewID: func() string { n++; return fmt.Sprintf("per_%d", n) },
		OnAsked: func(e *messages.PermissionAsked) {
			rec.add("asked " + e.RequestID + " " + e.Permission)
			asked <- e.RequestID
		},
		OnReplied: func(e *messages.PermissionReplied) {
			rec.add("replied " + e.RequestID + " " + e.Reply + " " + e.Message)
		},
	})
	return p, rec, asked
}

func TestPendingReplyPaths(t *testing.T) {
	tests := []struct {
		reply    Reply
		message  string
		wantType messages.ErrorType
		saved    int
	}{
		{reply: Once},
		{reply: Always, saved: 1},
		{reply: Reject, message: "not on prod", wantType: messages.ErrPermissionRejected},
	}
	for _, tc := range tests {
		t.Run(string(tc.reply), func(t *testing.T) {
			pending, rec, asked := newRecordedPending()
			perms, approvals := newPerms(t, nil, pending)
			done := make(chan error, 1)
			go func() {
				done <- perms.Check(context.Background(), Request{SessionID: "ses_1", Permission: "bash", Patterns: []string{"deploy"}}, nil)
			}()
			id := <-asked
			list := pending.List()
			if len(list) != 1 || list[0].ID != id || list[0].Patterns[0] != "deploy" {
				t.Fatalf("List() = %+v", list)
			}
			if err := pending.Reply(id, tc.reply, tc.message); err != nil {
				t.Fatal(err)
			}
			err := <-done
			if got := errorType(t, err); got != tc.wantType {
				t.Fatalf("Check = %v, want type %q", err, tc.wantType)
			}
			if tc.message != "" && (err == nil || !strings.Contains(err.Error(), tc.message)) {
				t.Fatalf("the user's message must reach the model: %v", err)
			}
			if got := len(approvals.List("proj")); got != tc.saved {
				t.Fatalf("saved %d approvals, want %d", got, tc.saved)
			}
			if len(pending.List()) != 0 {
				t.Fatal("answered question still listed")
			}
			want := []string{"asked " + id + " bash", "replied " + id + " " + string(tc.reply) + " " + tc.message}
			if got := rec.list(); !slices.Equal(got, want) {
				t.Fatalf("events %q, want %q", got, want)
			}
		})
	}
}

func TestPendingUnknownRequest(t *testing.T) {
	pending, _, _ := newRecordedPending()
	err := pending.Reply("per_missing", Once, "")
	if !errors.Is(err, ErrRequestNotFound) {
		t.Fatalf("got %v, want ErrRequestNotFound", err)
	}
	var nf *RequestNotFoundError
	if !errors.As(err, &nf) || nf.RequestID != "per_missing" {
		t.Fatalf("errors.As(*RequestNotFoundError) failed: %v", err)
	}
	var me *messages.Error
	if !errors.As(err, &me) || me.Type != messages.ErrNotFound || me.Type.HTTPStatus() != http.StatusNotFound {
		t.Fatalf("must convert to a not-found *messages.Error, got %+v", me)
	}
}

func TestPendingRejectsInvalidReply(t *testing.T) {
	pending, _, asked := newRecordedPending()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := pending.Ask(ctx, Request{SessionID: "ses_1", Permission: "bash"})
		done <- err
	}()
	id := <-asked
	if err := pending.Reply(id, "sometimes", ""); errorTypeOf(err) != messages.ErrInvalid {
		t.Fatalf("got %v, want invalid", err)
	}
	if len(pending.List()) != 1 {
		t.Fatal("an invalid reply must leave the question waiting")
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Ask = %v, want context.Canceled", err)
	}
}

func TestPendingCancelSessionOnInterrupt(t *testing.T) {
	pending, rec, asked := newRecordedPending()
	perms, _ := newPerms(t, nil, pending)
	results := make(chan error, 3)
	var wg sync.WaitGroup
	for _, s := range []messages.SessionID{"ses_a", "ses_a", "ses_b"} {
		wg.Go(func() {
			results <- perms.Check(context.Background(), Request{SessionID: s, Permission: "edit", Patterns: []string{"f"}}, nil)
		})
	}
	for range 3 {
		<-asked
	}
	if n := pending.Cancel("ses_a"); n != 2 {
		t.Fatalf("Cancel withdrew %d questions, want 2", n)
	}
	for range 2 {
		if err := <-results; errorType(t, err) != messages.ErrAborted {
			t.Fatalf("withdrawn question settled as %v, want aborted", err)
		}
	}
	left := pending.List()
	if len(left) != 1 || left[0].SessionID != "ses_b" {
		t.Fatalf("left %+v, want only ses_b's question", left)
	}
	if n := pending.CancelAll(); n != 1 {
		t.Fatalf("CancelAll withdrew %d", n)
	}
	if err := <-results; errorType(t, err) != messages.ErrAborted {
		t.Fatalf("got %v, want aborted", err)
	}
	wg.Wait()
	replied := 0
	for _, e := range rec.list() {
		if strings.Contains(e, "replied") && strings.Contains(e, "reject cancelled") {
			replied++
		}
	}
	if replied != 3 {
		t.Fatalf("want 3 cancellation events, got %q", rec.list())
	}
}

func TestPendingContextEndWithdraws(t *testing.T) {
	pending, rec, asked := newRecordedPending()
	perms, _ := newPerms(t, nil, pending)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- perms.Check(ctx, Request{SessionID: "ses_1", Permission: "bash", Patterns: []string{"ls"}}, nil)
	}()
	id := <-asked
	cancel()
	if err := <-done; errorType(t, err) != messages.ErrAborted {
		t.Fatalf("got %v, want aborted", err)
	}
	if len(pending.List()) != 0 {
		t.Fatal("question still listed after its context ended")
	}
	if err := pending.Reply(id, Once, ""); !errors.Is(err, ErrRequestNotFound) {
		t.Fatalf("reply after withdrawal: %v, want not found", err)
	}
	if got := rec.list(); len(got) != 2 || !strings.Contains(got[1], "replied "+id+" reject cancelled") {
		t.Fatalf("events %q", got)
	}
}

func TestPendingListKeepsAskOrder(t *testing.T) {
	pending, _, asked := newRecordedPending()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			_, _ = pending.Ask(ctx, Request{SessionID: "ses_1", Permission: fmt.Sprint("p", i)})
		})
		<-asked // serialize the asks so their order is known
	}
	list := pending.List()
	if len(list) != 3 {
		t.Fatalf("List() = %+v, want the 3 questions", list)
	}
	for i, r := range list {
		if r.ID != fmt.Sprintf("per_%d", i+1) || r.Permission != fmt.Sprint("p", i) {
			t.Fatalf("List()[%d] = %+v", i, r)
		}
	}
	cancel()
	wg.Wait()
}

func TestPendingKeepsSuppliedID(t *testing.T) {
	pending, _, asked := newRecordedPending()
	done := make(chan Answer, 1)
	go func() {
		a, _ := pending.Ask(context.Background(), Request{ID: "per_mine", Permission: "bash"})
		done <- a
	}()
	if id := <-asked; id != "per_mine" {
		t.Fatalf("ID %q, want the supplied per_mine", id)
	}
	if err := pending.Reply("per_mine", Once, ""); err != nil {
		t.Fatal(err)
	}
	if a := <-done; a.Reply != Once {
		t.Fatalf("answer %+v", a)
	}
}

func errorTypeOf(err error) messages.ErrorType {
	var me *messages.Error
	if errors.As(err, &me) {
		return me.Type
	}
	return ""
}
