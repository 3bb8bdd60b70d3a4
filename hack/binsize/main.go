// Command binsize tells where a Go binary's bytes go: its sections, then
// the symbols of each package (text, read-only data and data; zeroed
// memory takes no room in the file and is left out), largest first.
//
//	go build -trimpath -o /tmp/br ./cmd/bridge-runner   # not stripped: needs symbols
//	go run ./hack/binsize [-n 30] [-modules] /tmp/br
package main

import (
	"cmp"
	"debug/elf"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
)

func main() {
	top := flag.Int("n", 30, "how many packages to list")
	modules := flag.Bool("modules", false, "sum by module (host/owner/name) instead of package")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: binsize [-n N] [-modules] BINARY")
		os.Exit(2)
	}
	f, err := elf.Open(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer f.Close()
	fmt.Println("section           MiB")
	for _, s := range f.Sections {
		if s.Type != elf.SHT_NOBITS && s.Size >= 64<<10 && !strings.HasPrefix(s.Name, ".debug") && s.Name != ".symtab" && s.Name != ".strtab" {
			fmt.Printf("%-16s %6.2f\n", s.Name, mib(s.Size))
		}
	}
	syms, err := f.Symbols()
	if err != nil {
		fmt.Fprintln(os.Stderr, "no symbols (a stripped binary?):", err)
		os.Exit(1)
	}
	sizes := map[string]uint64{}
	for _, s := range syms {
		if int(s.Section) >= len(f.Sections) || f.Sections[s.Section].Type == elf.SHT_NOBITS {
			continue
		}
		key := pkgOf(s.Name)
		if *modules {
			key = moduleOf(key)
		}
		sizes[key] += s.Size
	}
	keys := make([]string, 0, len(sizes))
	for k := range sizes {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Compare(sizes[b], sizes[a]) })
	fmt.Println("\nsymbols (MiB)")
	for _, k := range keys[:min(*top, len(keys))] {
		fmt.Printf("%6.2f %s\n", mib(sizes[k]), k)
	}
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

// pkgOf is the package path of a Go symbol: "k8s.io/x/y.(*T).M" is
// k8s.io/x/y; linker-made symbols (go:..., type:...) keep their prefix.
func pkgOf(name string) string {
	if i := strings.IndexByte(name, ':'); i > 0 && !strings.Contains(name[:i], "/") && !strings.Contains(name[:i], ".") {
		return name[:i] + ":"
	}
	slash := strings.LastIndexByte(name, '/')
	if dot := strings.IndexByte(name[slash+1:], '.'); dot >= 0 {
		return name[:slash+1+dot]
	}
	return name
}

// moduleOf shortens a package path to its module-like root: the standard
// library is "std", a domain path keeps three parts (two for k8s.io & co).
func moduleOf(pkg string) string {
	parts := strings.Split(pkg, "/")
	switch {
	case strings.HasSuffix(pkg, ":"):
		return "linker tables (" + pkg + ")"
	case !strings.Contains(parts[0], "."):
		return "std"
	case parts[0] == "k8s.io" || parts[0] == "sigs.k8s.io" || parts[0] == "go.yaml.in" || parts[0] == "gopkg.in":
		return strings.Join(parts[:min(2, len(parts))], "/")
	}
	return strings.Join(parts[:min(3, len(parts))], "/")
}
