package api

import "time"

// Reading a replica's log (GET .../workloads/{name}/logs, and the agent's
// /logs/{tenant}/{name}/{replica} behind it). An answer is a piece of the
// log file, bytes as the replica wrote them:
//
//   - tail=N: the last N bytes; from=OFFSET: the bytes from that offset
//     (at most MaxLogAnswer either way; the two exclude each other);
//   - follow=true: after what is there, the bytes as they are written,
//     flushed as they come, until the replica's run ends (its process is
//     no longer running on the node and all it wrote was sent), the caller
//     goes away, or LogFollowFor passes; the caller then asks again from
//     where it got to (from = X-Log-Start + the bytes it read).
//
// The headers say where the piece lies in the file.
const (
	// HeaderLogStart is the offset in the log of the answer's first byte.
	HeaderLogStart = "X-Log-Start"
	// HeaderLogSize is the log's size when the answer began.
	HeaderLogSize = "X-Log-Size"
	// HeaderLogEnded is "true" when the replica's process was not running
	// on its node when the answer began: the log is complete, nothing
	// more is written to it by that run.
	HeaderLogEnded = "X-Log-Ended"

	// MaxLogAnswer bounds the bytes of one answer.
	MaxLogAnswer = 64 << 20
	// MaxLogOffset bounds tail and from (1 TiB).
	MaxLogOffset = 1 << 40
	// LogFollowFor bounds how long one follow answer lasts.
	LogFollowFor = 10 * time.Minute
)
