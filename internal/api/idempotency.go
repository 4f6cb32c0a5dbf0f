package api

// Idempotent submissions. A client sends HeaderIdempotencyKey with a
// submission (the Go client a random 128-bit hex value, the same on every
// retry of that submission). The server keeps the key with the workload
// it created, per tenant, for 24 hours: a submission with a key it holds
// and the same body is answered as the first one was (201 and the
// workload), with HeaderIdempotentReplayed "true", and creates nothing;
// the same key with a different body is refused (422, Field
// "Idempotency-Key").
const (
	HeaderIdempotencyKey     = "Idempotency-Key"
	HeaderIdempotentReplayed = "Idempotent-Replayed"
	// MaxIdempotencyKey is the longest key the server accepts.
	MaxIdempotencyKey = 128
	// CodeIdempotencyMismatch: the key was used with another body (422).
	CodeIdempotencyMismatch = "IdempotencyKeyReused"
)
