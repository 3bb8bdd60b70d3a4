package testutil

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEveryServiceIsStartedAndStoppedByMake: each service that
// hack/services.sh starts for the suite (an "up NAME UP DOWN ..." line) is
// also started by `make services-up` and stopped by `make services-down`,
// so that a new one (a second cluster beside a shared one) is not left
// running by the make targets that stop "all of them".
func TestEveryServiceIsStartedAndStoppedByMake(t *testing.T) {
	services, err := os.ReadFile("../../hack/services.sh")
	require.NoError(t, err)
	makefile, err := os.ReadFile("../../Makefile")
	require.NoError(t, err)
	upTarget, downTarget := makeRecipe(t, string(makefile), "services-up"), makeRecipe(t, string(makefile), "services-down")
	ups := regexp.MustCompile(`(?m)^up \S+ (hack/\S+-up\.sh) (hack/\S+-down\.sh) `).FindAllStringSubmatch(string(services), -1)
	require.Greater(t, len(ups), 5, "hack/services.sh's up lines were not found")
	for _, u := range ups {
		assert.Contains(t, upTarget, "bash "+u[1], "make services-up does not start what hack/services.sh starts")
		assert.Contains(t, downTarget, "bash "+u[2], "make services-down does not stop what hack/services.sh starts")
	}
}

// makeRecipe is the text of a Makefile target's recipe (its tab-indented
// lines after "target:").
func makeRecipe(t *testing.T, makefile, target string) string {
	_, rest, ok := strings.Cut(makefile, "\n"+target+":")
	require.True(t, ok, "the Makefile has no target %s", target)
	var recipe []string
	for _, line := range strings.Split(rest, "\n")[1:] {
		if !strings.HasPrefix(line, "\t") {
			break
		}
		recipe = append(recipe, line)
	}
	require.NotEmpty(t, recipe, "the recipe of %s", target)
	return strings.Join(recipe, "\n")
}
