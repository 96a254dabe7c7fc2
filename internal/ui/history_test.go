package ui

import (
	"testing"
	"time"
)

func TestHistoryKeepsAWindowAndForgetsDeletedComputes(t *testing.T) {
	h := newHistory(time.Minute)
	t0 := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	for i := 0; i < 10; i++ {
		now := t0.Add(time.Duration(i) * 10 * time.Second)
		pass := map[string]Sample{"/a": {Time: now, Idle: i}}
		if i < 5 {
			pass["/b"] = Sample{Time: now, Running: 1}
		}
		h.record(now, pass)
	}
	a := h.after("/A", time.Time{}) // ids are case-insensitive, as ARM's
	if len(a) != 7 || a[0].Idle != 3 || a[6].Idle != 9 {
		t.Fatalf("window of a minute: %+v", a)
	}
	if b := h.after("/b", time.Time{}); len(b) != 0 {
		t.Fatalf("a compute missing from a pass is forgotten: %+v", b)
	}
	if got := h.after("/a", t0.Add(80*time.Second)); len(got) != 1 || got[0].Idle != 9 {
		t.Fatalf("after: %+v", got)
	}
	got := h.after("/a", time.Time{})
	got[0].Idle = 100
	if h.after("/a", time.Time{})[0].Idle == 100 {
		t.Fatal("after must return a copy")
	}
}

func TestSessionsAndCodes(t *testing.T) {
	s := newSessions()
	now := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	id, ses := s.open("hash", "admin", now)
	if got, ok := s.get(id, now.Add(SessionTTL-time.Second)); !ok || got.csrf != ses.csrf || got.principal != "admin" {
		t.Fatalf("get: %+v %v", got, ok)
	}
	if _, ok := s.get(id, now.Add(SessionTTL)); ok {
		t.Fatal("a session ends after its TTL")
	}
	id2, _ := s.open("hash", "admin", now)
	s.close(id2)
	if _, ok := s.get(id2, now); ok {
		t.Fatal("a closed session is gone")
	}
	c := s.mintCode("hash", "binding", now)
	if h, b, ok := s.redeem(c, now.Add(CodeTTL-time.Second)); !ok || h != "hash" || b != "binding" {
		t.Fatal("a fresh code works")
	}
	if _, _, ok := s.redeem(c, now); ok {
		t.Fatal("a code works once")
	}
	c = s.mintCode("hash", "binding", now)
	if _, _, ok := s.redeem(c, now.Add(CodeTTL)); ok {
		t.Fatal("an expired code does not work")
	}
	for k := range s.sessions {
		if k == id || k == id2 {
			t.Fatal("sessions are kept by the hash of their id, not the id")
		}
	}
}
