package routes

import (
	"embed"

	"github.com/cockroachdb/errors"
)

//go:embed *.yaml
var files embed.FS

// File returns the example route file name (e.g. "social.yaml").
func File(name string) ([]byte, error) {
	b, err := files.ReadFile(name)
	if err != nil {
		return nil, errors.Errorf("routes: %w", err)
	}
	return b, nil
}
