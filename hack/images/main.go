// Command images builds the OCI image tarballs the one-node cluster (hack/cluster) runs, without Docker and
// without a registry: each image is one layer of files from this machine, assembled with go-containerregistry
// and written as a tarball that `ctr images import` loads.
//
// The lbplane image is described once, by the Dockerfile: this builder runs the build stage's `go build` line
// and copies what the final stage's COPY lines copy, with its USER and ENTRYPOINT, onto a base equivalent to
// distroless/static:nonroot. Docker users build the same image with `docker build .`. The other images
// (Envoy, k6, pause, CoreDNS, nginx, HAProxy, the test client) exist for the cluster tests only: a binary and
// the shared libraries ldd finds for it.
//
// The Gateway API conformance suite (conformance/) runs its backends and a CoreDNS from images its own
// manifests name (registry.k8s.io/gateway-api/echo-basic:..., registry.k8s.io/coredns/coredns:...): they
// are built here from the suite's Go module and the CoreDNS version those manifests name, and written under
// exactly those names, so the node never pulls them. They are built only with -conformance (conformance/run.sh
// asks for them), since the chart test does not run them and the suite's CoreDNS is a build of its own.
//
//	go run ./hack/images -out .run/cluster/images [-only lbplane,envoy] [-conformance]
package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The names the cluster's manifests and the chart overrides use.
const (
	LbplaneImage = "ghcr.io/lbplane/lbplane:dev"
	EnvoyImage   = "lbplane.local/envoy:v1.40.0"
	PauseImage   = "lbplane.local/pause:1"
	K6Image      = "lbplane.local/k6:dev"
	NginxImage   = "lbplane.local/nginx:dev"
	HAProxyImage = "lbplane.local/haproxy:dev"
	ClientImage  = "lbplane.local/client:dev"
)

// file is one entry of an image's single layer.
type file struct {
	path    string // in the image, absolute
	mode    int64
	data    []byte // regular file; nil with dir or link
	dir     bool
	symlink string
	xattrs  map[string]string // extended attributes, as PAX records (security.capability: file capabilities)
}

type image struct {
	ref        string
	moreRefs   []string // further names of the same image, in the same tarball
	files      map[string]file
	entrypoint []string
	user       string
	env        []string
	unchanged  bool // write found the tarball already written from the same layer and settings
}

func newImage(ref string) *image {
	im := &image{ref: ref, files: map[string]file{}, env: []string{"PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}}
	im.dir("/tmp", 0o1777)
	return im
}

func (im *image) dir(p string, mode int64) {
	im.files[p] = file{path: p, mode: mode, dir: true}
}

func (im *image) data(p string, mode int64, b []byte) {
	im.files[p] = file{path: p, mode: mode, data: b}
}

// copy adds a file of this machine (symlinks followed) at p.
func (im *image) copy(host, p string, mode int64) {
	b, err := os.ReadFile(host)
	if err != nil {
		log.Fatalf("image %s: %v", im.ref, err)
	}
	im.data(p, mode, b)
}

// users writes /etc/passwd and /etc/group with root and these users (name:uid, the group has the same id).
func (im *image) users(users ...string) {
	passwd := "root:x:0:0:root:/root:/sbin/nologin\n"
	group := "root:x:0:\n"
	for _, u := range users {
		n, id, _ := strings.Cut(u, ":")
		passwd += fmt.Sprintf("%s:x:%s:%s:%s:/home/%s:/sbin/nologin\n", n, id, id, n, n)
		group += fmt.Sprintf("%s:x:%s:\n", n, id)
		im.dir("/home/"+n, 0o755)
	}
	im.data("/etc/passwd", 0o644, []byte(passwd))
	im.data("/etc/group", 0o644, []byte(group))
	im.data("/etc/nsswitch.conf", 0o644, []byte("passwd: files\ngroup: files\nhosts: files dns\n"))
}

var lddLine = regexp.MustCompile(`^\s*(\S+)(?: => (\S+))? \(0x[0-9a-f]+\)$`)

// binary adds an executable and the shared libraries ldd resolves for it (libDirs searched first): libraries
// go to /lib/x86_64-linux-gnu, which Debian's dynamic loader searches, and the loader to its own path.
func (im *image) binary(host, p string, libDirs ...string) {
	im.copy(host, p, 0o755)
	cmd := exec.Command("ldd", host)
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+strings.Join(libDirs, ":"))
	out, err := cmd.Output()
	if err != nil {
		// "not a dynamic executable": static, nothing more to add.
		return
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, "not found") {
			log.Fatalf("image %s: %s: %s", im.ref, host, strings.TrimSpace(line))
		}
		m := lddLine.FindStringSubmatch(line)
		if m == nil || strings.HasPrefix(m[1], "linux-vdso") {
			continue
		}
		if m[2] == "" { // the loader: /lib64/ld-linux-x86-64.so.2
			im.copy(m[1], m[1], 0o755)
			continue
		}
		im.copy(m[2], "/lib/x86_64-linux-gnu/"+path.Base(m[1]), 0o755)
	}
}

func (im *image) write(dir string) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	// Parent folders first, each once; entries sorted, for a reproducible layer.
	all := map[string]file{}
	for p, f := range im.files {
		all[p] = f
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if _, ok := all[d]; !ok {
				all[d] = file{path: d, mode: 0o755, dir: true}
			}
		}
	}
	paths := make([]string, 0, len(all))
	for p := range all {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	epoch := time.Unix(0, 0)
	for _, p := range paths {
		f := all[p]
		h := &tar.Header{Name: strings.TrimPrefix(p, "/"), Mode: f.mode, ModTime: epoch, Format: tar.FormatPAX}
		for k, v := range f.xattrs {
			if h.PAXRecords == nil {
				h.PAXRecords = map[string]string{}
			}
			h.PAXRecords["SCHILY.xattr."+k] = v
		}
		switch {
		case f.dir:
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		case f.symlink != "":
			h.Typeflag, h.Linkname = tar.TypeSymlink, f.symlink
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(f.data); err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	layerBytes := buf.Bytes()
	// The layer is reproducible: when the tarball there was written from the same layer and settings, it is
	// kept (compressing and writing it again is most of the time a second `make images` takes).
	out := filepath.Join(dir, strings.NewReplacer("/", "_", ":", "_").Replace(im.ref)+".tar")
	sum := sha256.New()
	sum.Write(layerBytes)
	fmt.Fprintf(sum, "\x00%s\x00%q\x00%s\x00%q\x00%s", im.ref, im.entrypoint, im.user, im.env, runtime.GOARCH)
	if len(im.moreRefs) > 0 {
		fmt.Fprintf(sum, "\x00%q", im.moreRefs)
	}
	stamp := hex.EncodeToString(sum.Sum(nil))
	if old, err := os.ReadFile(out + ".sum"); err == nil && string(old) == stamp {
		if _, err := os.Stat(out); err == nil {
			im.unchanged = true
			return nil
		}
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	}, tarball.WithCompressionLevel(gzip.BestSpeed))
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
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config.Entrypoint, cf.Config.User, cf.Config.Env = im.entrypoint, im.user, im.env
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	refs := map[name.Reference]v1.Image{}
	for _, r := range append([]string{im.ref}, im.moreRefs...) {
		ref, err := name.ParseReference(r)
		if err != nil {
			return err
		}
		refs[ref] = img
	}
	os.Remove(out + ".sum")
	if err := tarball.MultiRefWriteToFile(out+".tmp", refs); err != nil {
		return err
	}
	if err := os.Rename(out+".tmp", out); err != nil {
		return err
	}
	return os.WriteFile(out+".sum", []byte(stamp), 0o644)
}

// tool is the path of a pinned tool (hack/tools.sh path-<name>), installed first.
func tool(name string) string {
	if out, err := exec.Command("hack/tools.sh", name).CombinedOutput(); err != nil {
		log.Fatalf("hack/tools.sh %s: %v\n%s", name, err, out)
	}
	out, err := exec.Command("hack/tools.sh", "path-"+name).Output()
	if err != nil {
		log.Fatalf("hack/tools.sh path-%s: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}

// dockerfile is what this builder takes from the Dockerfile: the build stage's go build command and the final
// stage's copies, user and entrypoint.
type dockerfile struct {
	build      string            // the RUN line that runs go build, its output folder /out/
	copies     map[string]string // from the build stage: source -> destination folder
	user       string
	entrypoint []string
}

func parseDockerfile(p string) (*dockerfile, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	d := &dockerfile{copies: map[string]string{}}
	// Continuation lines joined.
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	stage := 0
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		instr, rest, _ := strings.Cut(line, " ")
		switch strings.ToUpper(instr) {
		case "FROM":
			stage++
		case "RUN":
			if strings.Contains(rest, "go build") {
				d.build = rest
			}
		case "COPY":
			f := strings.Fields(rest)
			if stage < 2 || len(f) < 3 || f[0] != "--from=build" {
				continue
			}
			for _, src := range f[1 : len(f)-1] {
				d.copies[src] = f[len(f)-1]
			}
		case "USER":
			d.user = rest
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(rest), &d.entrypoint); err != nil {
				return nil, fmt.Errorf("%s: ENTRYPOINT: %v", p, err)
			}
		}
	}
	if d.build == "" || !strings.Contains(d.build, "/out/") || len(d.copies) == 0 || len(d.entrypoint) == 0 {
		return nil, fmt.Errorf("%s: this builder needs a build stage whose RUN go build writes to /out/, COPY --from=build lines and an ENTRYPOINT", p)
	}
	return d, nil
}

// lbplane builds the Dockerfile's image.
func lbplane(tmp string) *image {
	d, err := parseDockerfile("Dockerfile")
	if err != nil {
		log.Fatal(err)
	}
	out := filepath.Join(tmp, "out") + "/"
	cmd := exec.Command("sh", "-c", strings.ReplaceAll(d.build, "/out/", out))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		log.Fatalf("Dockerfile's %q: %v", d.build, err)
	}
	im := newImage(LbplaneImage)
	// distroless/static:nonroot: nonroot (65532), CA certificates, /tmp.
	im.users("nonroot:65532")
	im.copy("/etc/ssl/certs/ca-certificates.crt", "/etc/ssl/certs/ca-certificates.crt", 0o644)
	for src, dst := range d.copies {
		im.copy(strings.Replace(src, "/out/", out, 1), path.Join(dst, path.Base(src)), 0o755)
	}
	im.user, im.entrypoint = d.user, d.entrypoint
	return im
}

// envoy: the pinned Envoy binary and the libraries it links, as user envoy (101) like the upstream image, and
// nothing else: no shell, coreutils or perl, as in a distroless image. The chart needs none (its probes and
// preStop hook are HTTP, answered by Envoy and by envoy-sidecar from lbplane's image), and TestCluster checks
// that a shell cannot be started in the chart's Envoy container.
func envoy() *image {
	im := newImage(EnvoyImage)
	im.users("envoy:101")
	im.binary(tool("envoy"), "/usr/local/bin/envoy")
	im.entrypoint, im.user = []string{"/usr/local/bin/envoy"}, "101"
	return im
}

// client: bash and cat, for the cluster tests' in-cluster HTTP clients (bash's /dev/tcp), as nonroot.
func client() *image {
	im := newImage(ClientImage)
	im.users("nonroot:65532")
	for _, b := range []string{"/bin/bash", "/bin/cat"} {
		im.binary(b, b)
	}
	im.files["/bin/sh"] = file{path: "/bin/sh", mode: 0o777, symlink: "bash"}
	im.entrypoint, im.user = []string{"/bin/bash"}, "65532"
	return im
}

// gobuild builds a static binary of pkg, in the module of the folder dir ("" for lbplane's).
func gobuild(dir, tmp, pkg, bin string) string {
	out := filepath.Join(tmp, bin)
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		log.Fatalf("go build %s: %v", pkg, err)
	}
	return out
}

func pause(tmp string) *image {
	im := newImage(PauseImage)
	im.binary(gobuild("", tmp, "./hack/images/pause", "pause"), "/pause")
	im.entrypoint, im.user = []string{"/pause"}, "65535"
	return im
}

func k6() *image {
	im := newImage(K6Image)
	im.users("k6:12345")
	im.binary(tool("k6"), "/usr/bin/k6")
	im.entrypoint, im.user, im.env = []string{"/usr/bin/k6"}, "12345", append(im.env, "HOME=/tmp")
	return im
}

func coredns(ref string) *image {
	im := newImage(ref)
	im.users("nonroot:65532")
	im.binary(tool("coredns"), "/coredns")
	im.entrypoint, im.user = []string{"/coredns"}, "65532"
	return im
}

// debian: nginx or HAProxy from the pinned Debian packages hack/tools.sh unpacks, with their libraries.
func debian(ref, bin string) *image {
	wrapper := tool(path.Base(bin))
	root := filepath.Join(filepath.Dir(filepath.Dir(wrapper)), "root")
	im := newImage(ref)
	im.users("nonroot:65532", "nobody:65534")
	im.binary(filepath.Join(root, bin), bin, filepath.Join(root, "usr/lib/x86_64-linux-gnu"))
	im.entrypoint, im.user = []string{bin}, "65532"
	return im
}

// The conformance suite's module, as conformance/go.mod pins it.
const (
	conformanceDir    = "conformance"
	conformanceModule = "sigs.k8s.io/gateway-api/conformance"
	echoBasicPackage  = conformanceModule + "/echo-basic"
)

var imageLine = regexp.MustCompile(`(?m)^[\s-]*image:\s*["']?([^\s"'#]+)`)

// manifestImages is every image name the Kubernetes manifests in text use, once each, sorted.
func manifestImages(text []byte) []string {
	var refs []string
	for _, m := range imageLine.FindAllSubmatch(text, -1) {
		refs = append(refs, string(m[1]))
	}
	slices.Sort(refs)
	return slices.Compact(refs)
}

// conformanceRefs is the names of the images the suite's manifests (base/manifests.yaml, which Setup applies,
// and tests/*.yaml) run, echo-basic's and CoreDNS's, read from the suite's module (downloaded when missing).
func conformanceRefs() (echoBasic, coredns []string) {
	cmd := exec.Command("go", "mod", "download", "-json", conformanceModule)
	cmd.Dir = conformanceDir
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	var mod struct{ Dir, Version string }
	if err == nil {
		err = json.Unmarshal(out, &mod)
	}
	if err != nil || mod.Dir == "" {
		log.Fatalf("the conformance suite's module (%s in %s/go.mod): %v", conformanceModule, conformanceDir, err)
	}
	files, _ := filepath.Glob(filepath.Join(mod.Dir, "tests", "*.yaml"))
	for _, f := range append([]string{filepath.Join(mod.Dir, "base", "manifests.yaml")}, files...) {
		b, err := os.ReadFile(f)
		if err != nil {
			log.Fatal(err)
		}
		for _, ref := range manifestImages(b) {
			switch {
			case strings.Contains(ref, "/echo-basic:"):
				echoBasic = append(echoBasic, ref)
			case strings.Contains(ref, "/coredns:"):
				coredns = append(coredns, ref)
			}
		}
	}
	slices.Sort(echoBasic)
	slices.Sort(coredns)
	echoBasic, coredns = slices.Compact(echoBasic), slices.Compact(coredns)
	if len(echoBasic) == 0 || len(coredns) != 1 {
		log.Fatalf("%s@%s: expected echo-basic images and one CoreDNS image in its manifests, found %q and %q", conformanceModule, mod.Version, echoBasic, coredns)
	}
	return echoBasic, coredns
}

// echoBasic is the suite's backend, built from its module as its Dockerfile (docker/Dockerfile.echo-basic)
// builds it, on distroless/static:nonroot, under every name the manifests use.
func echoBasic(tmp string, refs []string) *image {
	im := newImage(refs[0])
	im.moreRefs = refs[1:]
	im.users("nonroot:65532")
	im.copy("/etc/ssl/certs/ca-certificates.crt", "/etc/ssl/certs/ca-certificates.crt", 0o644)
	im.binary(gobuild(conformanceDir, tmp, echoBasicPackage, "echo-basic"), "/echo-basic")
	im.entrypoint, im.user = []string{"/echo-basic"}, "65532:65532"
	return im
}

// capNetBindService is a security.capability extended attribute (struct vfs_cap_data, revision 2, little
// endian) granting CAP_NET_BIND_SERVICE, permitted and effective: what `setcap cap_net_bind_service=+ep` writes.
func capNetBindService() string {
	const revision2, effective, netBindService = 0x02000000, 0x1, 10
	b := make([]byte, 20)
	binary.LittleEndian.PutUint32(b[0:], revision2|effective)
	binary.LittleEndian.PutUint32(b[4:], 1<<netBindService) // permitted, capabilities 0-31
	return string(b)
}

// conformanceCoreDNS is the suite's CoreDNS as its upstream image is: the binary at the manifest's tag, with
// the capability to bind port 53 as nonroot (upstream's Dockerfile runs setcap), which the suite's pod adds to
// its bounding set while dropping all others.
func conformanceCoreDNS(ref string) *image {
	_, version, ok := strings.Cut(ref[strings.LastIndex(ref, "/"):], ":")
	if !ok {
		log.Fatalf("image %s: no tag", ref)
	}
	im := newImage(ref)
	im.users("nonroot:65532")
	im.copy("/etc/ssl/certs/ca-certificates.crt", "/etc/ssl/certs/ca-certificates.crt", 0o644)
	im.binary(tool("coredns@"+version), "/coredns")
	f := im.files["/coredns"]
	f.xattrs = map[string]string{"security.capability": capNetBindService()}
	im.files["/coredns"] = f
	im.entrypoint, im.user = []string{"/coredns"}, "65532:65532"
	return im
}

func main() {
	outDir := flag.String("out", ".run/cluster/images", "folder for the image tarballs")
	only := flag.String("only", "", "comma-separated images to build (lbplane,envoy,pause,k6,coredns,nginx,haproxy,client,echo-basic,conformance-coredns); empty: the cluster's, and with -conformance the suite's too")
	withSuite := flag.Bool("conformance", false, "also build the Gateway API conformance suite's images (echo-basic and its CoreDNS)")
	corednsRef := flag.String("coredns-image", "", "the CoreDNS image's name (default lbplane.local/coredns:<hack/tools.sh COREDNS_VERSION>)")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("images: ")
	if *corednsRef == "" {
		b, err := os.ReadFile("hack/tools.sh")
		if err != nil {
			log.Fatal(err)
		}
		m := regexp.MustCompile(`(?m)^COREDNS_VERSION=(\S+)$`).FindSubmatch(b)
		if m == nil {
			log.Fatal("hack/tools.sh has no COREDNS_VERSION")
		}
		*corednsRef = "lbplane.local/coredns:" + string(m[1])
	}
	tmp, err := os.MkdirTemp("", "lbplane-images-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		log.Fatal(err)
	}
	suiteRefs := sync.OnceValues(conformanceRefs)
	builders := map[string]func() *image{
		"lbplane": func() *image { return lbplane(tmp) },
		"envoy":   envoy,
		"pause":   func() *image { return pause(tmp) },
		"k6":      k6,
		"coredns": func() *image { return coredns(*corednsRef) },
		"nginx":   func() *image { return debian(NginxImage, "/usr/sbin/nginx") },
		"haproxy": func() *image { return debian(HAProxyImage, "/usr/sbin/haproxy") },
		"client":  client,
		"echo-basic": func() *image {
			refs, _ := suiteRefs()
			return echoBasic(tmp, refs)
		},
		"conformance-coredns": func() *image {
			_, refs := suiteRefs()
			return conformanceCoreDNS(refs[0])
		},
	}
	names := []string{"pause", "coredns", "lbplane", "envoy", "k6", "nginx", "haproxy", "client"}
	if *withSuite {
		names = append(names, "echo-basic", "conformance-coredns")
	}
	if *only != "" {
		names = strings.Split(*only, ",")
	}
	for _, n := range names {
		b, ok := builders[n]
		if !ok {
			keys := make([]string, 0, len(builders))
			for k := range builders {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			log.Fatalf("-only: unknown image %q (known: %s)", n, strings.Join(keys, ", "))
		}
		start := time.Now()
		im := b()
		if err := im.write(*outDir); err != nil {
			log.Fatalf("%s: %v", im.ref, err)
		}
		if im.unchanged {
			log.Printf("%s unchanged (%.1fs)", im.ref, time.Since(start).Seconds())
			continue
		}
		log.Printf("%s in %.1fs", im.ref, time.Since(start).Seconds())
	}
}
