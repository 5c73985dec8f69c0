package core_test

import (
	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/dynamic"
)

// The core's tests run their models on core/dynamic's schedulers.
func init() { core.TestBatching = dynamic.Batchers{} }
