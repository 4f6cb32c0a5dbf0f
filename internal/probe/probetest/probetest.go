// Package probetest has what probe tests share: an endpoint that accepts
// connections and never answers.
package probetest

import (
	"net"
	"sync"
	"testing"
)

// DeadEndpoint listens on loopback, accepts every connection and never
// answers; it returns its URL ("http://127.0.0.1:PORT") and closes
// everything when the test ends.
func DeadEndpoint(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	tb.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return "http://" + ln.Addr().String()
}
