// Package ui holds the dashboard's assets (static/), embedded in the
// binary: the page, its script and its styles, with no third-party code
// and nothing fetched from elsewhere. internal/server serves them at /ui
// and the API they read (docs/dashboard.md).
package ui

import (
	"embed"
	"io/fs"
)

//go:embed static
var static embed.FS

// Assets is the dashboard's files, rooted at static/.
func Assets() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree always has static/
	}
	return sub
}
