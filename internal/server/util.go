package server

import (
	"encoding/json"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
)

func jsonUnmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

func timeDuration(d api.Duration) time.Duration { return time.Duration(d) }

func timeAfter(d time.Duration) <-chan time.Time { return time.After(d) }

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }
