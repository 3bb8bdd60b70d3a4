// Command mkimage writes a single-binary container image as a `docker save`
// style tarball that `ctr images import` loads, without a registry or a
// container engine: an empty base, one layer with the binary (and the few
// files a distroless static image has: /etc/passwd, /etc/group, /tmp,
// /home/nonroot), any extra files given with -file, and the entrypoint and
// user in the image config.
//
//	mkimage -binary bin/bridge-runner -path /bridge-runner -entrypoint /bridge-runner \
//	        -file /path/to/busybox:/bin/sh \
//	        -user 65532:65532 -tag bridge-e2e.local/bridge-runner:dev -o image.tar
//
// -tag takes several comma-separated references for the same image; -file
// (repeatable) copies SRC to DEST in the image, executable.
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	binary := flag.String("binary", "", "the static binary to put in the image")
	dest := flag.String("path", "", "where the binary goes in the image, e.g. /bridge-runner")
	entrypoint := flag.String("entrypoint", "", "the image's entrypoint (default: -path)")
	user := flag.String("user", "", "the image's user, e.g. 65532:65532 (default: root)")
	tag := flag.String("tag", "", "the image reference(s), comma-separated, e.g. bridge-e2e.local/bridge-runner:dev")
	out := flag.String("o", "", "the tarball to write")
	var extra []extraFile
	flag.Func("file", "SRC:DEST: copy SRC into the image at DEST, mode 0755 (repeatable)", func(v string) error {
		src, dest, ok := strings.Cut(v, ":")
		if !ok || src == "" || !path.IsAbs(dest) {
			return fmt.Errorf("want SRC:DEST with an absolute DEST, got %q", v)
		}
		extra = append(extra, extraFile{src: src, dest: dest})
		return nil
	})
	flag.Parse()
	if *binary == "" || *dest == "" || *tag == "" || *out == "" {
		flag.Usage()
		os.Exit(2)
	}
	if *entrypoint == "" {
		*entrypoint = *dest
	}
	if err := run(*binary, *dest, *entrypoint, *user, *tag, *out, extra); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

// extraFile is a file copied into the image (-file).
type extraFile struct{ src, dest string }

func run(binary, dest, entrypoint, user, tags, out string, extra []extraFile) error {
	var refs []name.Tag
	for _, t := range strings.Split(tags, ",") {
		ref, err := name.NewTag(strings.TrimSpace(t))
		if err != nil {
			return err
		}
		refs = append(refs, ref)
	}
	bin, err := os.ReadFile(binary)
	if err != nil {
		return err
	}
	files := map[string][]byte{dest: bin}
	for _, f := range extra {
		if files[f.dest], err = os.ReadFile(f.src); err != nil {
			return err
		}
	}
	layerTar, err := buildLayer(files)
	if err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.Architecture = "amd64"
	cf.OS = "linux"
	cf.Config.Entrypoint = []string{entrypoint}
	cf.Config.User = user
	cf.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	cf.Config.WorkingDir = "/"
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return err
	}
	img, err = mutate.CreatedAt(img, v1.Time{Time: time.Unix(0, 0)})
	if err != nil {
		return err
	}
	tmp := out + ".tmp"
	m := map[name.Tag]v1.Image{}
	for _, r := range refs {
		m[r] = img
	}
	if err := tarball.MultiWriteToFile(tmp, m); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

// buildLayer returns an uncompressed tar with the small files of a
// distroless static image and the given executables (path -> content, 0755).
func buildLayer(execs map[string][]byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime := time.Unix(0, 0)
	dirs := map[string]bool{}
	addDir := func(d string, mode int64) error {
		if d == "/" || d == "." || dirs[d] {
			return nil
		}
		dirs[d] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/", Mode: mode, ModTime: mtime})
	}
	addFile := func(p string, mode int64, data []byte) error {
		for _, d := range parents(p) {
			if err := addDir(d, 0o755); err != nil {
				return err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(p, "/"), Mode: mode, Size: int64(len(data)), ModTime: mtime}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	if err := addDir("/tmp", 0o1777); err != nil {
		return nil, err
	}
	// The nonroot user's home, its own as in distroless: outside a pod the
	// binary keeps its file record beneath it (~/.local/state).
	if err := addDir("/home", 0o755); err != nil {
		return nil, err
	}
	dirs["/home/nonroot"] = true
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "home/nonroot/", Mode: 0o700, Uid: 65532, Gid: 65532, ModTime: mtime}); err != nil {
		return nil, err
	}
	if err := addFile("/etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")); err != nil {
		return nil, err
	}
	if err := addFile("/etc/group", 0o644, []byte("root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n")); err != nil {
		return nil, err
	}
	paths := make([]string, 0, len(execs))
	for p := range execs {
		paths = append(paths, p)
	}
	sort.Strings(paths) // the same layer, byte for byte, for the same inputs
	for _, p := range paths {
		if err := addFile(p, 0o755, execs[p]); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// parents returns the directories above p, outermost first: /a/b/c -> /a, /a/b.
func parents(p string) []string {
	var out []string
	for d := path.Dir(p); d != "/" && d != "."; d = path.Dir(d) {
		out = append([]string{d}, out...)
	}
	return out
}
