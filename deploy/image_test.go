package deploy

// TestImage proves the CPU image's contents without a Docker engine. It
// assembles the filesystem of deploy/docker/Dockerfile's final stage from the
// Debian 12 packages gcr.io/distroless/cc-debian12 is made of (apt-get
// download, dpkg-deb -x), the stripped binary and ONNX Runtime at the paths of
// the Dockerfile's COPY and ENV lines, and runs inferd in it under chroot, as
// the image's users, with the image's environment and nothing else: no shell,
// no /etc/machine-id. ONNX Runtime is the library `make ort` fetched (npm's
// build of the version the Dockerfile takes from the GitHub release archive;
// the test downloads nothing but Debian packages). TestImageSpec, which needs
// neither root nor apt, keeps the Dockerfile's lists and this test in step.

import (
	"bytes"
	"crypto/x509"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	imageDockerfile = "docker/Dockerfile"
	imageBase       = "gcr.io/distroless/cc-debian12"
	// imageMaxBytes bounds the uncompressed tree, mounted models excluded.
	// 120 MB until as:// repositories (the Azure SDK with its identity
	// library) and the Redis response cache added about 11 MB to the binary.
	imageMaxBytes = 135_000_000
	// requireImageEnv, set by .ci/run, turns TestImage's skips into failures.
	requireImageEnv = "INFERD_REQUIRE_IMAGE_TEST"
	imgTelemetryEnv = "ORT_DISABLE_TELEMETRY"
)

// imageSpec is what TestImage builds and runs, all read from the Dockerfile.
type imageSpec struct {
	debian   string            // Debian release of the runtime base: "12"
	packages []string          // Debian packages extracted whole
	cacerts  string            // package whose certificates become the one bundle
	env      []string          // the base image's environment, then the runtime stage's ENV
	binary   string            // where COPY --from=build puts inferd
	links    map[string]string // symlinks COPY --from=build puts beside it: image path -> target
	ortDir   string            // where COPY --from=ort puts ONNX Runtime
	ortLib   string            // ENV ORT_LIB_PATH
	entry    string            // ENTRYPOINT's program, resolved through PATH
	users    map[string]string
	modelSrc string // the usage's -v $PWD/<src>:<dst>
	modelDst string
}

var (
	imageLine  = regexp.MustCompile(`^#\s*(image-[a-z]+):\s*(.*?)\s*$`)
	usageMount = regexp.MustCompile(`-v \$PWD/(\S+?):(/\S+?)(?::ro)?\s`)
)

// readImageSpec reads the `# image-...:` lines above the runtime stage and
// the runtime stage's instructions, failing t where they do not fit together.
func readImageSpec(t *testing.T) imageSpec {
	t.Helper()
	raw, err := os.ReadFile(imageDockerfile)
	if err != nil {
		t.Fatal(err)
	}
	df := parseDockerfile(t, imageDockerfile)
	s := imageSpec{users: map[string]string{}, links: map[string]string{}}
	for _, line := range strings.Split(string(raw), "\n") {
		m := imageLine.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		switch m[1] {
		case "image-debian":
			s.debian = m[2]
		case "image-packages":
			s.packages = append(s.packages, strings.Fields(m[2])...)
		case "image-cacerts":
			if f := strings.Fields(m[2]); len(f) > 0 {
				s.cacerts = f[0]
			}
		case "image-env":
			s.env = append(s.env, m[2])
		default:
			t.Errorf("%s: unknown %s line", imageDockerfile, m[1])
		}
	}
	if s.debian == "" || len(s.packages) == 0 || s.cacerts == "" || len(s.env) == 0 {
		t.Fatalf("%s: want # image-debian, image-packages, image-cacerts and image-env lines above the runtime stage", imageDockerfile)
	}

	rt := df.stage("runtime")
	if rt == nil {
		t.Fatalf("%s: no runtime stage", imageDockerfile)
	}
	if b := df.base(*rt); b != imageBase {
		t.Fatalf("runtime base %q: the image-* lines and TestImage describe %s; describe the new base before changing it", b, imageBase)
	}
	if !strings.HasSuffix(imageBase, "-debian"+s.debian) {
		t.Errorf("# image-debian: %s, but the base is %s", s.debian, imageBase)
	}
	for _, c := range rt.all("COPY") {
		f := strings.Fields(c)
		if len(f) != 3 || !strings.HasPrefix(f[0], "--from=") {
			t.Errorf("runtime COPY %q: TestImage knows only COPY --from=<stage> <src> <dst>", c)
			continue
		}
		from, src, dst := strings.TrimPrefix(f[0], "--from="), f[1], f[2]
		st := df.stage(from)
		if st == nil {
			t.Errorf("COPY --from=%s: no such stage", from)
			continue
		}
		switch from {
		case "build":
			bin, links, err := imgBuildCopy(st, src, dst)
			if err != nil {
				t.Errorf("COPY --from=build %s %s: %v", src, dst, err)
				continue
			}
			if bin != "" {
				s.binary = bin
			}
			maps.Copy(s.links, links)
		case "ort":
			if !strings.Contains(st.text(), src) {
				t.Errorf("COPY --from=ort %s: the ort stage does not fill it", src)
			}
			s.ortDir = dst
		default:
			t.Errorf("runtime COPY --from=%s: TestImage does not know what that stage makes", from)
		}
	}
	for _, e := range rt.all("ENV") {
		for _, kv := range strings.Fields(e) {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || strings.ContainsAny(v, `"'$`) {
				t.Errorf("ENV %q: TestImage reads only unquoted KEY=value pairs", e)
				continue
			}
			if k == "ORT_LIB_PATH" {
				s.ortLib = v
			}
			s.env = append(s.env, kv)
		}
	}
	if s.binary == "" || s.ortDir == "" || s.ortLib == "" {
		t.Fatalf("runtime stage: want COPY --from=build (inferd), COPY --from=ort (ONNX Runtime) and ENV ORT_LIB_PATH; got binary %q, ort %q, ORT_LIB_PATH %q", s.binary, s.ortDir, s.ortLib)
	}
	if !strings.HasPrefix(s.ortLib, s.ortDir+"/") {
		t.Errorf("ORT_LIB_PATH %s is not under %s, where COPY --from=ort puts the library", s.ortLib, s.ortDir)
	}

	var entry []string
	if err := json.Unmarshal([]byte(df.effective("ENTRYPOINT")), &entry); err != nil || len(entry) == 0 {
		t.Fatalf("ENTRYPOINT %q: want the exec form", df.effective("ENTRYPOINT"))
	}
	s.entry = entry[0]
	if !path.IsAbs(s.entry) {
		for _, dir := range strings.Split(imgEnv(s.env, "PATH"), ":") {
			if path.Join(dir, s.entry) == s.binary {
				s.entry = s.binary
				break
			}
		}
	}
	if s.entry != s.binary {
		t.Errorf("ENTRYPOINT %q does not name %s through the image's PATH", entry[0], s.binary)
	}

	s.users["default"] = df.effective("USER")
	if sm := df.stage("sagemaker"); sm != nil && len(sm.all("USER")) > 0 {
		s.users["sagemaker"] = sm.all("USER")[len(sm.all("USER"))-1]
	}
	m := usageMount.FindStringSubmatch(string(raw))
	if m == nil || !strings.Contains(string(raw), "--model-repository="+m[2]) {
		t.Fatalf("%s: no usage line `docker run -v $PWD/<repository>:<dir> ... --model-repository=<dir>`", imageDockerfile)
	}
	s.modelSrc, s.modelDst = m[1], m[2]
	return s
}

func imgEnv(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

var (
	goBuildOutput = regexp.MustCompile(`\bgo build\s[^;&|]*?\s-o\s+(\S+)`)
	lnSymlink     = regexp.MustCompile(`\bln\s+-s\s+(\S+)\s+(\S+)`)
)

// imgBuildCopy is what `COPY --from=build <src> <dst>` puts in an image, read
// from the build stage's `go build -o` and `ln -s`: the binary's path in the
// image ("" when this COPY does not carry it) and the symlinks, by path in
// the image, with their targets as ln wrote them. src is the file go build
// writes, or a folder holding it and links to it. A link named as the source
// itself is an error: COPY follows it and copies the binary a second time.
func imgBuildCopy(build *stage, src, dst string) (bin string, links map[string]string, err error) {
	text := build.text()
	var outs []string
	for _, m := range goBuildOutput.FindAllStringSubmatch(text, -1) {
		outs = append(outs, path.Clean(m[1]))
	}
	made := map[string]string{}
	for _, m := range lnSymlink.FindAllStringSubmatch(text, -1) {
		made[path.Clean(m[2])] = m[1]
	}
	src = path.Clean(src)
	if _, ok := made[src]; ok {
		return "", nil, fmt.Errorf("%s is a symlink: COPY copies what it points to, a second binary; copy its folder", src)
	}
	if slices.Contains(outs, src) {
		if strings.HasSuffix(dst, "/") {
			return path.Join(dst, path.Base(src)), nil, nil
		}
		return dst, nil, nil
	}
	links = map[string]string{}
	for _, o := range outs {
		if rel, ok := strings.CutPrefix(o, src+"/"); ok {
			if bin != "" {
				return "", nil, fmt.Errorf("two go build outputs under %s", src)
			}
			bin = path.Join(dst, rel)
		}
	}
	for l, target := range made {
		if rel, ok := strings.CutPrefix(l, src+"/"); ok {
			links[path.Join(dst, rel)] = target
		}
	}
	if bin == "" && len(links) == 0 {
		return "", nil, fmt.Errorf("the build stage writes nothing there (go build -o, ln -s)")
	}
	return bin, links, nil
}

// imgLinkDest is the path the symlink at p (a path in the image) names.
func imgLinkDest(p, target string) string {
	if path.IsAbs(target) {
		return path.Clean(target)
	}
	return path.Join(path.Dir(p), target)
}

// imgBasePATH is PATH in the base images TestImage does not build, which
// their Dockerfiles do not set: nvidia/cuda prepends its folders to Docker's
// default, and Lambda runs the function with its documented PATH.
var imgBasePATH = map[string]string{
	"nvidia/cuda":                    "/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"public.ecr.aws/lambda/provided": "/usr/local/bin:/usr/bin/:/bin:/opt/bin",
}

// imgInstall is what the final image of a Dockerfile gets from its build
// stage, and the PATH programs are looked up on.
type imgInstall struct {
	binary string
	links  map[string]string // image path -> ln -s target
	path   string
	entry  string // ENTRYPOINT's program, as written
}

// readImgInstall reads file's final stage and the stages it is built on:
// their COPY --from=build lines, ENV PATH (else the base's: the `# image-env:
// PATH=` line of a distroless Dockerfile, or imgBasePATH) and ENTRYPOINT.
func readImgInstall(t *testing.T, file string) imgInstall {
	t.Helper()
	df := parseDockerfile(t, file)
	build := df.stage("build")
	if build == nil {
		t.Fatalf("%s: no build stage", file)
	}
	in := imgInstall{links: map[string]string{}}
	var chain []stage // final stage first
	for i := len(df.stages) - 1; i >= 0; {
		chain = append(chain, df.stages[i])
		from := df.stages[i].from
		i = slices.IndexFunc(df.stages[:i], func(p stage) bool { return p.name != "" && p.name == from })
	}
	for _, st := range slices.Backward(chain) {
		for _, c := range st.all("COPY") {
			f := strings.Fields(c)
			if len(f) != 3 || f[0] != "--from=build" {
				continue
			}
			bin, links, err := imgBuildCopy(build, f[1], f[2])
			if err != nil {
				t.Errorf("%s: COPY %s: %v", file, c, err)
				continue
			}
			if bin != "" {
				if in.binary != "" {
					t.Errorf("%s: the binary is copied twice (%s, %s)", file, in.binary, bin)
				}
				in.binary = bin
			}
			maps.Copy(in.links, links)
		}
		for _, e := range st.all("ENV") {
			for _, kv := range strings.Fields(e) {
				if v, ok := strings.CutPrefix(kv, "PATH="); ok {
					in.path = v
				}
			}
		}
	}
	if in.binary == "" {
		t.Fatalf("%s: no COPY --from=build carries the go build output", file)
	}
	if in.path == "" {
		for _, line := range strings.Split(read(t, file), "\n") {
			if m := imageLine.FindStringSubmatch(strings.TrimSpace(line)); m != nil && m[1] == "image-env" {
				if v, ok := strings.CutPrefix(m[2], "PATH="); ok {
					in.path = v
				}
			}
		}
	}
	if in.path == "" {
		base := df.base(chain[len(chain)-1])
		repo, _, _ := strings.Cut(base, ":")
		if in.path = imgBasePATH[repo]; in.path == "" {
			t.Fatalf("%s: base %s: PATH unknown (add it to imgBasePATH)", file, base)
		}
	}
	var entry []string
	if err := json.Unmarshal([]byte(df.effective("ENTRYPOINT")), &entry); err == nil && len(entry) > 0 {
		in.entry = entry[0]
	}
	return in
}

// lookup resolves name as `docker run` does (through PATH unless it is a
// path) among what the build stage installs: the path found and the one it
// runs after links (both "" when none). Entries of the base image are not
// known here; none of the bases has inferd or tritonserver.
func (in imgInstall) lookup(name string) (found, runs string) {
	cands := []string{name}
	if !strings.Contains(name, "/") {
		cands = nil
		for _, dir := range strings.Split(in.path, ":") {
			cands = append(cands, path.Join(dir, name))
		}
	}
	for _, p := range cands {
		for seen, q := 0, p; seen < 8; seen++ {
			if q == in.binary {
				return p, q
			}
			target, ok := in.links[q]
			if !ok {
				break
			}
			q = imgLinkDest(q, target)
		}
		if _, ok := in.links[p]; ok {
			return p, "" // a link that does not reach the binary
		}
	}
	return "", ""
}

// TestImageSpec checks the Dockerfile's image-* lines against the rest of it
// and against what the binary needs; it runs everywhere, TestImage only as
// root.
func TestImageSpec(t *testing.T) {
	s := readImageSpec(t)
	// distroless/cc's own additions to base: the C++ runtime ORT links.
	for _, want := range []string{"libc6", "libgcc-s1", "libstdc++6", "libgomp1"} {
		if !slices.Contains(s.packages, want) {
			t.Errorf("# image-packages lacks %s", want)
		}
	}
	seen := map[string]bool{}
	for _, p := range s.packages {
		if seen[p] {
			t.Errorf("# image-packages lists %s twice", p)
		}
		seen[p] = true
	}
	if _, err := os.Stat(filepath.Join("..", s.modelSrc, "simple", "config.pbtxt")); err != nil {
		t.Errorf("usage mounts %s, which lacks the README's model: %v", s.modelSrc, err)
	}
	for _, u := range []string{"default", "sagemaker"} {
		if _, _, err := imgUser(s.users[u]); err != nil {
			t.Errorf("%s stage: %v", u, err)
		}
	}
	// The binary sets it itself (core/onnxrt); TestImage proves that by
	// running with exactly the image's environment.
	if v := imgEnv(s.env, imgTelemetryEnv); v != "" {
		t.Errorf("the image sets %s=%s; TestImage would no longer prove that the binary does", imgTelemetryEnv, v)
	}

	checkCloudSpec(t, s, readCloudSpec(t))

	// Every image, built here or not, runs the one binary as tritonserver
	// too: a symlink on PATH (a copy would double the binary's share of the
	// image), so manifests written for Triton work unchanged.
	for _, file := range []string{"docker/Dockerfile", "docker/Dockerfile.gpu", "docker/Dockerfile.lambda"} {
		t.Run(path.Base(file), func(t *testing.T) {
			in := readImgInstall(t, file)
			found, runs := in.lookup("tritonserver")
			switch {
			case found == "":
				t.Errorf("no tritonserver on PATH %s (links %v)", in.path, in.links)
			case found == in.binary:
				t.Errorf("tritonserver is the binary itself (%s), not a link to it", found)
			case runs != in.binary:
				t.Errorf("%s -> %s does not lead to the binary %s", found, in.links[found], in.binary)
			default:
				t.Logf("%s -> %s (PATH %s)", found, in.links[found], in.path)
			}
			if _, runs := in.lookup(in.entry); runs != in.binary {
				t.Errorf("ENTRYPOINT %q does not run %s", in.entry, in.binary)
			}
		})
	}
}

// imgUser reads a numeric USER (uid or uid:gid); distroless has no
// /etc/passwd lookups to offer beyond root and nonroot.
func imgUser(u string) (uid, gid uint32, err error) {
	us, gs, hasGID := strings.Cut(u, ":")
	if !hasGID {
		gs = us
	}
	a, err1 := strconv.ParseUint(us, 10, 32)
	b, err2 := strconv.ParseUint(gs, 10, 32)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("USER %q: want numeric uid[:gid]", u)
	}
	return uint32(a), uint32(b), nil
}

// skipImage skips TestImage, unless CI asked for it to run.
func skipImage(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv(requireImageEnv) != "" {
		t.Fatalf("%s is set, but: "+format, append([]any{requireImageEnv}, args...)...)
	}
	t.Skipf(format, args...)
}

func TestImage(t *testing.T) {
	spec := readImageSpec(t)
	if os.Geteuid() != 0 {
		skipImage(t, "needs root (chroot, files owned by the image's users); CI runs it as root")
	}
	for _, tool := range []string{"apt-get", "apt-cache", "dpkg-deb"} {
		if _, err := exec.LookPath(tool); err != nil {
			skipImage(t, "needs %s to fetch and unpack the image's Debian packages", tool)
		}
	}
	if id, ver := imgHostRelease(); id != "debian" || ver != spec.debian {
		skipImage(t, "this host's apt is %s %s, not Debian %s, whose packages the image is made of", id, ver, spec.debian)
	}
	ortLib := os.Getenv("ORT_LIB_PATH")
	if ortLib == "" {
		ortLib = "../third_party/onnxruntime/libonnxruntime.so.1"
	}
	if _, err := os.Stat(ortLib); err != nil {
		t.Fatalf("ONNX Runtime (run `make ort`): %v", err)
	}

	start := time.Now()
	work := t.TempDir()
	root := filepath.Join(work, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	debs := imgFetchDebs(t, append(slices.Clone(spec.packages), spec.cacerts))
	for _, p := range spec.packages {
		imgRun(t, "", "dpkg-deb", "-x", debs[p], root)
	}
	imgCACerts(t, debs[spec.cacerts], root, filepath.Join(work, "cacerts"))
	imgDistrolessFiles(t, root)

	bin := filepath.Join(work, "inferd")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version=image-test", "-o", bin, "./cmd/inferd")
	build.Dir = ".."
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	imgCopyFile(t, bin, filepath.Join(root, spec.binary), 0o755)
	for link, target := range spec.links {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	imgCopyFile(t, ortLib, filepath.Join(root, spec.ortLib), 0o644)
	t.Logf("tree built in %v", time.Since(start).Round(time.Millisecond))

	fullTree, _ := imgTreeSize(t, root) // before the models are mounted
	t.Run("contents", func(t *testing.T) {
		for _, p := range []string{"/bin/sh", "/usr/bin/sh", "/bin/bash", "/usr/bin/bash", "/bin/dash", "/usr/bin/dash", "/busybox", "/etc/machine-id", "/var/lib/dbus/machine-id"} {
			if _, err := os.Lstat(filepath.Join(root, p)); err == nil {
				t.Errorf("%s exists; distroless has none", p)
			}
		}
		for _, dir := range strings.Split(imgEnv(spec.env, "PATH"), ":") {
			if _, err := os.Lstat(filepath.Join(root, dir, "sh")); err == nil {
				t.Errorf("%s/sh exists: the image has a shell", dir)
			}
		}
		imgCheckELF(t, root, spec.binary)
		imgCheckELF(t, root, spec.ortLib)

		// tritonserver: a symlink to the binary, found through PATH.
		p := imgLookPath(t, root, spec.env, "tritonserver")
		fi, err := os.Lstat(filepath.Join(root, p))
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			t.Errorf("%s: want a symlink to %s, have %v (%v)", p, spec.binary, fi.Mode(), err)
		} else if target, _ := os.Readlink(filepath.Join(root, p)); imgLinkDest(p, target) != spec.binary {
			t.Errorf("%s -> %s, want a link to %s", p, target, spec.binary)
		} else {
			t.Logf("%s -> %s", p, target)
		}

		total, top := imgTreeSize(t, root)
		t.Logf("uncompressed tree: %.1f MB (%d bytes); largest: %s", float64(total)/1e6, total, top)
		if total >= imageMaxBytes {
			t.Errorf("uncompressed tree is %d bytes, over the %d budget", total, imageMaxBytes)
		}
	})

	// What `docker run -v` and SageMaker mount; not part of the image.
	imgCopyTree(t, filepath.Join("..", spec.modelSrc), filepath.Join(root, spec.modelDst))
	imgCopyTree(t, filepath.Join("..", spec.modelSrc), filepath.Join(root, "opt/ml/model"))
	reqPath, reqBody, wantOut := imgREADMEExample(t)

	t.Run("default", func(t *testing.T) {
		httpPort, metricsPort := imgFreePort(t), imgFreePort(t)
		p := startImage(t, root, spec, spec.users["default"], nil,
			"--model-repository="+spec.modelDst, "--http-port="+strconv.Itoa(httpPort), "--metrics-port="+strconv.Itoa(metricsPort))
		base := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
		p.waitReady(t, base+"/v2/health/ready")
		imgCheckInfer(t, base+reqPath, reqBody, wantOut)
		p.stop(t)
	})

	// What a manifest written for Triton runs (`command: ["tritonserver"]`,
	// `docker run --entrypoint tritonserver`): the same binary through the
	// link, as the default user.
	t.Run("tritonserver", func(t *testing.T) {
		httpPort, metricsPort := imgFreePort(t), imgFreePort(t)
		p := startImageProgram(t, root, spec, imgLookPath(t, root, spec.env, "tritonserver"), spec.users["default"], nil,
			"--model-repository="+spec.modelDst, "--http-port="+strconv.Itoa(httpPort), "--metrics-port="+strconv.Itoa(metricsPort))
		base := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
		p.waitReady(t, base+"/v2/health/ready")
		imgCheckInfer(t, base+reqPath, reqBody, wantOut)
		p.stop(t)
	})

	t.Run("sagemaker", func(t *testing.T) {
		port := imgFreePort(t)
		p := startImage(t, root, spec, spec.users["sagemaker"],
			[]string{"SAGEMAKER_BIND_TO_PORT=" + strconv.Itoa(port), "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME=simple"}, "serve")
		base := fmt.Sprintf("http://127.0.0.1:%d", port)
		p.waitReady(t, base+"/ping")
		imgCheckInfer(t, base+"/invocations", reqBody, wantOut)
		p.stop(t)
	})

	// The guard's guard: with telemetry explicitly on, ORT 1.29.0 dies in
	// this tree exactly as the image did before the binary set the variable
	// itself (microsoft/onnxruntime#32173, fixed in 1.30.0 by #32226).
	t.Run("telemetry-on-crashes", func(t *testing.T) {
		if v := makefileORTVersion(t); v != "1.29.0" {
			t.Skipf("ORT %s: only 1.29.0 has the telemetry crash", v)
		}
		httpPort, metricsPort := imgFreePort(t), imgFreePort(t)
		p := startImage(t, root, spec, spec.users["default"], []string{imgTelemetryEnv + "=0"},
			"--model-repository="+spec.modelDst, "--http-port="+strconv.Itoa(httpPort), "--metrics-port="+strconv.Itoa(metricsPort))
		ready := fmt.Sprintf("http://127.0.0.1:%d/v2/health/ready", httpPort)
		deadline := time.Now().Add(60 * time.Second)
		for !p.exited() {
			if resp, err := http.Get(ready); err == nil {
				resp.Body.Close()
				t.Fatalf("served with %s=0: this ORT no longer crashes (microsoft/onnxruntime#32226); drop this sub-test", imgTelemetryEnv)
			}
			if time.Now().After(deadline) {
				t.Fatalf("neither crashed nor served within 60s with %s=0", imgTelemetryEnv)
			}
			time.Sleep(100 * time.Millisecond)
		}
		out := p.output()
		if p.err == nil || !strings.Contains(out, "SIGSEGV") || !strings.Contains(out, "CreateOrtEnv") {
			t.Fatalf("with %s=0: exit %v; want SIGSEGV in CreateOrtEnv\n%s", imgTelemetryEnv, p.err, imgExcerpt(out))
		}
	})
	// Last: the per-cloud builds replace the binary in the tree.
	t.Run("builds", func(t *testing.T) { imgCloudBuilds(t, root, work, spec, fullTree, reqBody, wantOut) })
	t.Logf("TestImage took %v", time.Since(start).Round(time.Millisecond))
}

// imgHostRelease is ID and VERSION_ID from /etc/os-release.
func imgHostRelease() (id, version string) {
	b, _ := os.ReadFile("/etc/os-release")
	for _, l := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(l, "=")
		v = strings.Trim(v, `"`)
		switch k {
		case "ID":
			id = v
		case "VERSION_ID":
			version = v
		}
	}
	return id, version
}

func imgRun(t *testing.T, dir, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

// imgFetchDebs returns the .deb of each package's apt candidate, downloaded
// once into a cache shared between runs.
func imgFetchDebs(t *testing.T, pkgs []string) map[string]string {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	cache = filepath.Join(cache, "inferd", "image-debs")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	files, err := imgAptCandidates(pkgs)
	updated := false
	if err != nil {
		t.Logf("%v; running apt-get update", err)
		imgRun(t, "", "apt-get", "update", "-qq")
		updated = true
		if files, err = imgAptCandidates(pkgs); err != nil {
			t.Fatal(err)
		}
	}
	for attempt := 0; ; attempt++ {
		var missing []string
		for _, p := range pkgs {
			if _, err := os.Stat(filepath.Join(cache, files[p])); err != nil {
				missing = append(missing, p)
			}
		}
		if len(missing) == 0 {
			break
		}
		err := imgDownloadDebs(cache, files, missing)
		if err == nil {
			continue
		}
		if updated || attempt > 0 {
			t.Fatal(err)
		}
		// Stale lists name versions the mirror no longer has.
		t.Logf("%v; running apt-get update", err)
		imgRun(t, "", "apt-get", "update", "-qq")
		updated = true
		if files, err = imgAptCandidates(pkgs); err != nil {
			t.Fatal(err)
		}
	}
	out := map[string]string{}
	for _, p := range pkgs {
		out[p] = filepath.Join(cache, files[p])
	}
	return out
}

// imgAptCandidates maps each package to its candidate's file name, from apt's
// local lists (no network).
func imgAptCandidates(pkgs []string) (map[string]string, error) {
	out, err := exec.Command("apt-cache", append([]string{"show", "--no-all-versions"}, pkgs...)...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("apt-cache show: %v: %s", err, bytes.TrimSpace(out))
	}
	files := map[string]string{}
	var pkg string
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "Package: "); ok {
			pkg = v
		} else if v, ok := strings.CutPrefix(line, "Filename: "); ok && files[pkg] == "" {
			files[pkg] = path.Base(v)
		}
	}
	for _, p := range pkgs {
		if files[p] == "" {
			return nil, fmt.Errorf("apt-cache has no candidate for %s", p)
		}
	}
	return files, nil
}

// imgDownloadDebs fetches pkgs into a private directory, then renames each
// .deb into the cache under its pool name (atomic for concurrent runs).
func imgDownloadDebs(cache string, files map[string]string, pkgs []string) error {
	tmp, err := os.MkdirTemp(cache, "download-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	// apt drops to the _apt user for downloads where it can write.
	_ = os.Chmod(tmp, 0o755)
	cmd := exec.Command("apt-get", append([]string{"download", "-q"}, pkgs...)...)
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get download %s: %v\n%s", strings.Join(pkgs, " "), err, out)
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, "*.deb"))
	for _, d := range debs {
		out, err := exec.Command("dpkg-deb", "-f", d, "Package").Output()
		if err != nil {
			return fmt.Errorf("dpkg-deb -f %s: %v", d, err)
		}
		name := files[strings.TrimSpace(string(out))]
		if name == "" {
			return fmt.Errorf("apt-get download left %s, which was not asked for", filepath.Base(d))
		}
		if err := os.Rename(d, filepath.Join(cache, name)); err != nil {
			return err
		}
	}
	return nil
}

// imgCACerts does what distroless does with ca-certificates: one bundle
// of every certificate the package ships, and its copyright file.
func imgCACerts(t *testing.T, deb, root, scratch string) {
	t.Helper()
	imgRun(t, "", "dpkg-deb", "-x", deb, scratch)
	var certs []string
	err := filepath.WalkDir(filepath.Join(scratch, "usr/share/ca-certificates"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".crt") {
			certs = append(certs, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(certs)
	var bundle bytes.Buffer
	for _, c := range certs {
		b, err := os.ReadFile(c)
		if err != nil {
			t.Fatal(err)
		}
		bundle.Write(bytes.TrimSpace(b))
		bundle.WriteByte('\n')
	}
	if pool := x509.NewCertPool(); len(certs) < 100 || !pool.AppendCertsFromPEM(bundle.Bytes()) {
		t.Fatalf("%s: %d certificates, not a usable bundle", deb, len(certs))
	}
	imgWriteFile(t, filepath.Join(root, "etc/ssl/certs/ca-certificates.crt"), bundle.String(), 0o644)
	imgCopyFile(t, filepath.Join(scratch, "usr/share/doc/ca-certificates/copyright"), filepath.Join(root, "usr/share/doc/ca-certificates/copyright"), 0o644)
}

const (
	distrolessPasswd = `root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
`
	distrolessGroup = `root:x:0:
nobody:x:65534:
tty:x:5:
staff:x:50:
nonroot:x:65532:
`
	distrolessNsswitch = `passwd:         files
group:          files
shadow:         files
hosts:          files dns
networks:       files
protocols:      files
services:       files
ethers:         files
rpc:            files
`
)

// imgDistrolessFiles adds what distroless writes besides its packages:
// users, groups, homes, /tmp.
func imgDistrolessFiles(t *testing.T, root string) {
	t.Helper()
	imgWriteFile(t, filepath.Join(root, "etc/passwd"), distrolessPasswd, 0o644)
	imgWriteFile(t, filepath.Join(root, "etc/group"), distrolessGroup, 0o644)
	imgWriteFile(t, filepath.Join(root, "etc/nsswitch.conf"), distrolessNsswitch, 0o644)
	for _, d := range []struct {
		dir  string
		mode fs.FileMode
		uid  int
	}{{"tmp", 0o777 | fs.ModeSticky, 0}, {"root", 0o700, 0}, {"home/nonroot", 0o700, 65532}} {
		p := filepath.Join(root, d.dir)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, d.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, d.uid, d.uid); err != nil {
			t.Fatal(err)
		}
	}
}

// imgHome is the passwd home of uid, as Docker sets HOME.
func imgHome(uid uint32) string {
	for _, l := range strings.Split(distrolessPasswd, "\n") {
		f := strings.Split(l, ":")
		if len(f) == 7 && f[2] == strconv.Itoa(int(uid)) {
			return f[5]
		}
	}
	return "/"
}

func imgWriteFile(t *testing.T, p, content string, mode fs.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func imgCopyFile(t *testing.T, src, dst string, mode fs.FileMode) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

func imgCopyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		imgCopyFile(t, p, filepath.Join(dst, rel), 0o644)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// imgCheckELF checks that the loader and every DT_NEEDED library of the ELF
// file at p (a path in the image) are in the image.
func imgCheckELF(t *testing.T, root, p string) {
	t.Helper()
	f, err := elf.Open(filepath.Join(root, p))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type != elf.PT_INTERP {
			continue
		}
		b, _ := io.ReadAll(prog.Open())
		interp := strings.TrimRight(string(b), "\x00")
		if _, err := os.Stat(filepath.Join(root, interp)); err != nil {
			t.Errorf("%s: loader %s is not in the image", p, interp)
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatal(err)
	}
	dirs := []string{path.Dir(p), "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"}
	for _, lib := range libs {
		found := false
		for _, d := range dirs {
			if _, err := os.Stat(filepath.Join(root, d, lib)); err == nil {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("%s needs %s, which is not in the image", p, lib)
		}
	}
}

// imgTreeSize is the uncompressed size of the tree (regular files and links,
// as an image layer holds them) and its three largest files.
func imgTreeSize(t *testing.T, root string) (int64, string) {
	t.Helper()
	type entry struct {
		path string
		size int64
	}
	var total int64
	var all []entry
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		total += info.Size()
		rel, _ := filepath.Rel(root, p)
		all = append(all, entry{"/" + rel, info.Size()})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].size > all[j].size })
	var top []string
	for _, e := range all[:min(3, len(all))] {
		top = append(top, fmt.Sprintf("%s %.1f MB", e.path, float64(e.size)/1e6))
	}
	return total, strings.Join(top, ", ")
}

// imgREADMEExample is the README's curl example: the request path and body,
// and the answer the README shows.
func imgREADMEExample(t *testing.T) (reqPath, body string, want any) {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)curl -s localhost:8000(/v2/models/[^/ ]+/infer) -d '([^']+)'\\s*```\\s*```json\\n(.*?)\\n```").FindStringSubmatch(string(b))
	if m == nil {
		t.Fatal("README.md: no `curl -s localhost:8000/v2/models/<model>/infer -d '...'` example followed by its json answer")
	}
	if err := json.Unmarshal([]byte(m[3]), &want); err != nil {
		t.Fatalf("README.md: the example's answer: %v", err)
	}
	return m[1], m[2], want
}

func imgCheckInfer(t *testing.T, url, body string, want any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var got any
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &got) != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("POST %s: %s %s\nwant the README's answer", url, resp.Status, b)
	}
}

func imgFreePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// imageProc is inferd running in the tree.
type imageProc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error // Wait's, once done is closed
}

// startImage runs the ENTRYPOINT with args, chrooted into root as user,
// with the image's environment (and HOME, as Docker sets it) plus extra.
func startImage(t *testing.T, root string, spec imageSpec, user string, extra []string, args ...string) *imageProc {
	t.Helper()
	return startImageProgram(t, root, spec, spec.entry, user, extra, args...)
}

// imgLookPath resolves name through the image's PATH in the tree at root,
// as Docker resolves an entrypoint: the first PATH folder holding it.
func imgLookPath(t *testing.T, root string, env []string, name string) string {
	t.Helper()
	for _, dir := range strings.Split(imgEnv(env, "PATH"), ":") {
		if _, err := os.Lstat(filepath.Join(root, dir, name)); err == nil {
			return path.Join(dir, name)
		}
	}
	t.Fatalf("no %s on the image's PATH %s", name, imgEnv(env, "PATH"))
	return ""
}

// startImageProgram is startImage with another program, a path in the image
// (argv[0] is its base name, as when Docker runs it by name).
func startImageProgram(t *testing.T, root string, spec imageSpec, program, user string, extra []string, args ...string) *imageProc {
	t.Helper()
	uid, gid, err := imgUser(user)
	if err != nil {
		t.Fatal(err)
	}
	p := &imageProc{log: filepath.Join(t.TempDir(), "inferd.log"), done: make(chan struct{})}
	logf, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	// No ORT_DISABLE_TELEMETRY unless extra has it: the binary sets it.
	p.cmd = &exec.Cmd{
		Path:   program, // a path inside root
		Args:   append([]string{path.Base(program)}, args...),
		Env:    append(append(slices.Clone(spec.env), "HOME="+imgHome(uid)), extra...),
		Dir:    "/",
		Stdout: logf,
		Stderr: logf,
		SysProcAttr: &syscall.SysProcAttr{
			Chroot:     root,
			Credential: &syscall.Credential{Uid: uid, Gid: gid},
			Pdeathsig:  syscall.SIGKILL,
		},
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("inferd output:\n%s", imgExcerpt(p.output()))
		}
	})
	return p
}

func (p *imageProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *imageProc) output() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

// imgExcerpt keeps the start of a long log (a crash names its cause there)
// and its end.
func imgExcerpt(s string) string {
	const n = 2000
	if len(s) <= 2*n {
		return s
	}
	return s[:n] + "\n...\n" + s[len(s)-n:]
}

// waitReady polls url until it answers 200, failing if inferd exits first.
func (p *imageProc) waitReady(t *testing.T, url string) {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if p.exited() {
			t.Fatalf("inferd exited before %s answered: %v", url, p.err)
		}
		if resp, err := client.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no 200 within 60s", url)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop sends SIGTERM and wants a clean exit.
func (p *imageProc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatal("inferd still running 30s after SIGTERM")
	}
	if p.err != nil {
		t.Errorf("inferd exited with %v after SIGTERM, want 0", p.err)
	}
}
