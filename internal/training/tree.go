package training

import (
	"github.com/sagebox/sagebox/internal/staging"
	"github.com/sagebox/sagebox/internal/toolkit"
)

// wsTree is the workspace as staging sees it.
func wsTree(w toolkit.Workspace) staging.Tree { return staging.Tree{Root: w.Root} }
