package deploy

// The per-cloud images' spec: deploy/docker/Dockerfile's cloudfs stage,
// which gathers the few files the per-cloud binaries and ONNX Runtime load
// from ${GO_IMAGE} (Debian 12), and the cloud-runtime, cloud and
// cloud-sagemaker stages on scratch. TestImageSpec checks it against the
// full image's stages; TestImage builds the same tree from the Debian
// packages (imgCloudBuilds).

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The Dockerfile's stage names for the per-cloud images, and the ARG that
// lists what cloudfs copies from ${GO_IMAGE}.
const (
	cloudFSStage      = "cloudfs"
	cloudRuntimeStage = "cloud-runtime"
	cloudFilesArg     = "CLOUD_FILES"
)

// cloudTargets maps each per-cloud build to the Dockerfile target its image
// is built from (Makefile `images`).
var cloudTargets = map[string]string{"sagemaker": "cloud-sagemaker", "vertex": "cloud"}

// cloudSpec is what the per-cloud images hold, all read from the Dockerfile.
type cloudSpec struct {
	files   []string          // CLOUD_FILES: paths in ${GO_IMAGE}, copied with links followed
	context string            // the repository folder cloudfs copies to the root (users, groups)
	env     []string          // cloud-runtime's ENV, in order
	binary  string            // where COPY --from=build puts inferd
	links   map[string]string // symlinks beside it: image path -> target
	ortDir  string
	ortLib  string
	entry   string            // ENTRYPOINT's program, as written
	users   map[string]string // build ("sagemaker", "vertex") -> its target's USER
}

// readCloudSpec reads the per-cloud stages, failing t where they are not the
// shape imgCloudBuilds rebuilds: a cloudfs stage on ${GO_IMAGE} with
// CLOUD_FILES, one COPY from the repository and a RUN that copies the list
// with links followed, and a scratch stage that copies cloudfs, ONNX Runtime
// and the build's output.
func readCloudSpec(t *testing.T) cloudSpec {
	t.Helper()
	df := parseDockerfile(t, imageDockerfile)
	s := cloudSpec{links: map[string]string{}, users: map[string]string{}}
	fsSt := df.stage(cloudFSStage)
	if fsSt == nil {
		t.Fatalf("%s: no %s stage", imageDockerfile, cloudFSStage)
	}
	if fsSt.from != "${GO_IMAGE}" || !strings.HasSuffix(df.base(*fsSt), "-bookworm") {
		t.Errorf("%s stage is FROM %s (%s); want ${GO_IMAGE}, Debian 12 (bookworm) as distroless/cc-debian12", cloudFSStage, fsSt.from, df.base(*fsSt))
	}
	for _, a := range fsSt.all("ARG") {
		if v, ok := strings.CutPrefix(a, cloudFilesArg+"="); ok {
			s.files = strings.Fields(strings.Trim(v, `"`))
		}
	}
	if len(s.files) == 0 {
		t.Fatalf("%s stage: no ARG %s=\"<path> ...\"", cloudFSStage, cloudFilesArg)
	}
	seen := map[string]bool{}
	for _, f := range s.files {
		if !path.IsAbs(f) || path.Clean(f) != f || strings.ContainsAny(f, `$"'*?`) || seen[f] {
			t.Errorf("%s: %q: want each path once, absolute, clean and literal", cloudFilesArg, f)
		}
		seen[f] = true
	}
	run := strings.Join(fsSt.all("RUN"), "\n")
	for _, want := range []string{"for f in ${" + cloudFilesArg + "}", `cp -L "$f" "/out$f"`, "chmod 1777 /out/tmp"} {
		if !strings.Contains(run, want) {
			t.Errorf("%s stage's RUN lacks %q: TestImage rebuilds the tree from what it does", cloudFSStage, want)
		}
	}
	for _, c := range fsSt.all("COPY") {
		f := strings.Fields(c)
		if len(f) != 2 || f[1] != "/out/" || !strings.HasSuffix(f[0], "/") {
			t.Errorf("%s COPY %q: TestImage knows only COPY <repository folder>/ /out/", cloudFSStage, c)
			continue
		}
		s.context = f[0]
	}
	if s.context == "" {
		t.Errorf("%s stage: no COPY of the users and groups", cloudFSStage)
	}

	rt := df.stage(cloudRuntimeStage)
	if rt == nil {
		t.Fatalf("%s: no %s stage", imageDockerfile, cloudRuntimeStage)
	}
	if rt.from != "scratch" {
		t.Errorf("%s is FROM %s, want scratch", cloudRuntimeStage, rt.from)
	}
	readCloudRuntime(t, df, rt, &s)
	for build, target := range cloudTargets {
		st := df.stage(target)
		if st == nil || st.from != cloudRuntimeStage || len(st.all("USER")) == 0 {
			t.Errorf("want a %s stage FROM %s with a USER, for the %s image", target, cloudRuntimeStage, build)
			continue
		}
		s.users[build] = st.all("USER")[len(st.all("USER"))-1]
	}
	return s
}

// readCloudRuntime reads the scratch stage's COPY, ENV and ENTRYPOINT lines
// into s.
func readCloudRuntime(t *testing.T, df *dockerfile, rt *stage, s *cloudSpec) {
	t.Helper()
	fromFS := false
	for _, c := range rt.all("COPY") {
		f := strings.Fields(c)
		if len(f) != 3 || !strings.HasPrefix(f[0], "--from=") {
			t.Errorf("%s COPY %q: TestImage knows only COPY --from=<stage> <src> <dst>", cloudRuntimeStage, c)
			continue
		}
		switch from := strings.TrimPrefix(f[0], "--from="); from {
		case cloudFSStage:
			fromFS = f[1] == "/out/" && f[2] == "/"
			if !fromFS {
				t.Errorf("COPY --from=%s %s %s: want /out/ /", cloudFSStage, f[1], f[2])
			}
		case "ort":
			s.ortDir = f[2]
		case "build":
			bin, links, err := imgBuildCopy(df.stage("build"), f[1], f[2])
			if err != nil {
				t.Errorf("%s COPY --from=build: %v", cloudRuntimeStage, err)
				continue
			}
			if bin != "" {
				s.binary = bin
			}
			maps.Copy(s.links, links)
		default:
			t.Errorf("%s COPY --from=%s: TestImage does not know what that stage makes", cloudRuntimeStage, from)
		}
	}
	for _, e := range rt.all("ENV") {
		for _, kv := range strings.Fields(e) {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || strings.ContainsAny(v, `"'$`) {
				t.Errorf("%s ENV %q: TestImage reads only unquoted KEY=value pairs", cloudRuntimeStage, e)
				continue
			}
			if k == "ORT_LIB_PATH" {
				s.ortLib = v
			}
			s.env = append(s.env, kv)
		}
	}
	var entry []string
	if err := json.Unmarshal([]byte(strings.Join(rt.all("ENTRYPOINT"), "")), &entry); err != nil || len(entry) == 0 {
		t.Errorf("%s: want one exec-form ENTRYPOINT", cloudRuntimeStage)
	} else {
		s.entry = entry[0]
	}
	if !fromFS || s.binary == "" || s.ortDir == "" || s.ortLib == "" {
		t.Fatalf("%s: want COPY --from=%s /out/ /, COPY --from=ort, COPY --from=build and ENV ORT_LIB_PATH; got binary %q, ort %q, ORT_LIB_PATH %q",
			cloudRuntimeStage, cloudFSStage, s.binary, s.ortDir, s.ortLib)
	}
}

// install is s as imgInstall, to resolve programs through PATH as the full
// image's are.
func (s cloudSpec) install() imgInstall {
	return imgInstall{binary: s.binary, links: s.links, path: imgEnv(s.env, "PATH"), entry: s.entry}
}

// checkCloudSpec checks the per-cloud stages against the full image's
// runtime stage: the same binary, library, environment, labels, ports and
// entrypoint, tritonserver on PATH, distroless's users, and the USERs.
func checkCloudSpec(t *testing.T, full imageSpec, s cloudSpec) {
	df := parseDockerfile(t, imageDockerfile)
	rt, crt := df.stage("runtime"), df.stage(cloudRuntimeStage)
	for _, op := range []string{"LABEL", "EXPOSE", "ENTRYPOINT"} {
		if a, b := crt.all(op), rt.all(op); !slices.Equal(a, b) {
			t.Errorf("%s %s %q differs from the runtime stage's %q", cloudRuntimeStage, op, a, b)
		}
	}
	if a, b := slices.Sorted(slices.Values(s.env)), slices.Sorted(slices.Values(full.env)); !slices.Equal(a, b) {
		t.Errorf("%s environment %q, want the full image's %q (distroless's and the runtime stage's)", cloudRuntimeStage, a, b)
	}
	if s.binary != full.binary || s.ortLib != full.ortLib || s.ortDir != full.ortDir || !maps.Equal(s.links, full.links) {
		t.Errorf("%s puts inferd at %s (links %v), ONNX Runtime at %s (%s); the full image at %s (%v), %s (%s)",
			cloudRuntimeStage, s.binary, s.links, s.ortDir, s.ortLib, full.binary, full.links, full.ortDir, full.ortLib)
	}
	in := s.install()
	if found, runs := in.lookup("tritonserver"); found == "" || found == s.binary || runs != s.binary {
		t.Errorf("%s: tritonserver on PATH %s is %q, want a link to %s", cloudRuntimeStage, in.path, found, s.binary)
	}
	if _, runs := in.lookup(s.entry); runs != s.binary {
		t.Errorf("%s: ENTRYPOINT %q does not run %s", cloudRuntimeStage, s.entry, s.binary)
	}
	if got, want := s.users["vertex"], full.users["default"]; got != want {
		t.Errorf("%s USER %s, want the default stage's %s (non-root)", cloudTargets["vertex"], got, want)
	}
	if got, want := s.users["sagemaker"], full.users["sagemaker"]; got != want {
		t.Errorf("%s USER %s, want the sagemaker stage's %s", cloudTargets["sagemaker"], got, want)
	}
	// The users are distroless's, so USER 65532 is nonroot in both images.
	for name, want := range map[string]string{"etc/passwd": distrolessPasswd, "etc/group": distrolessGroup, "etc/nsswitch.conf": distrolessNsswitch} {
		if got := read(t, filepath.Join("..", s.context, name)); got != want {
			t.Errorf("%s%s differs from distroless's (TestImage's):\n%s", s.context, name, got)
		}
	}
	if !slices.Contains(s.files, imgEnv(s.env, "SSL_CERT_FILE")) {
		t.Errorf("%s lacks the CA bundle SSL_CERT_FILE names", cloudFilesArg)
	}
}

// cloudResolve follows the symlinks of p, a path in the tree at root, as
// the kernel would with root as /: the path of the file it names.
func cloudResolve(root, p string) (string, error) {
	cur, rest := "/", strings.Split(p, "/")
	for hops := 0; len(rest) > 0; {
		name := rest[0]
		rest = rest[1:]
		if name == "" || name == "." {
			continue
		}
		next := path.Join(cur, name)
		fi, err := os.Lstat(filepath.Join(root, next))
		if err != nil {
			return "", fmt.Errorf("%s: %w", p, err)
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if hops++; hops > 40 {
			return "", fmt.Errorf("%s: too many levels of symbolic links", p)
		}
		target, err := os.Readlink(filepath.Join(root, next))
		if err != nil {
			return "", fmt.Errorf("%s: %w", p, err)
		}
		if path.IsAbs(target) {
			cur = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return cur, nil
}
