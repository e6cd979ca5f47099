package containerd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	containersapi "github.com/containerd/containerd/api/services/containers/v1"
	contentapi "github.com/containerd/containerd/api/services/content/v1"
	imagesapi "github.com/containerd/containerd/api/services/images/v1"
	leasesapi "github.com/containerd/containerd/api/services/leases/v1"
	snapshotsapi "github.com/containerd/containerd/api/services/snapshots/v1"
	tasksapi "github.com/containerd/containerd/api/services/tasks/v1"
	runcopts "github.com/containerd/containerd/api/types/runc/options"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// Namespace is kubelet's containerd namespace, where the CRI plugin puts
// pods' containers.
const Namespace = "k8s.io"

// snapshotter is containerd's default, the one `ctr images import` unpacks into.
const snapshotter = "overlayfs"

// Import loads an image tarball (docker-archive or OCI) into the k8s.io
// namespace with containerd's own importer, `ctr images import`, which also
// unpacks it into the overlayfs snapshotter.
func (d *Daemon) Import(tarball string) error {
	out, err := exec.Command(Binary("ctr"), "--address", d.Address, "--namespace", Namespace, "images", "import", tarball).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr images import %s: %w\n%s", tarball, err, out)
	}
	return nil
}

// Container is one container to run the way the CRI plugin runs a pod's
// container for kubelet: CRI labels, kubelet's cgroup path, runc.
type Container struct {
	ID     string
	Image  string // an imported image's ref
	Args   []string
	Labels map[string]string
	// CgroupsPath is the OCI spec's linux.cgroupsPath; kubelet's cgroupfs
	// driver gives "<cgroup root>/kubepods/<qos>/pod<uid>/<container id>".
	CgroupsPath string
	// CPUShares is the container's cpu.shares, as kubelet sets it from
	// the CPU request (the pod cgroup's own value is kubelet's, not runc's).
	CPUShares uint64
	// Annotations go in the OCI spec (the CRI plugin puts its own there).
	Annotations map[string]string
}

// client is a connection to the daemon with a namespaced context.
func (d *Daemon) client(ctx context.Context) (*grpc.ClientConn, context.Context, error) {
	conn, err := grpc.NewClient("unix://"+d.Address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, err
	}
	return conn, metadata.AppendToOutgoingContext(ctx, "containerd-namespace", Namespace), nil
}

// Run creates the container through containerd's API — a snapshot of the
// image, the container record with its OCI spec, a task run by runc
// (io.containerd.runc.v2) — starts it, and returns its init PID. It works
// under a lease, as containerd's own client does: until the container
// record refers to the new snapshot, nothing else keeps containerd's
// garbage collector from removing it.
func (d *Daemon) Run(ctx context.Context, c Container) (int, error) {
	conn, ctx, err := d.client(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	leases := leasesapi.NewLeasesClient(conn)
	lease, err := leases.Create(ctx, &leasesapi.CreateRequest{ID: "kubefair-harness-" + c.ID,
		Labels: map[string]string{"containerd.io/gc.expire": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}})
	if err != nil {
		return 0, fmt.Errorf("a lease for %s: %w", c.ID, err)
	}
	defer func(ctx context.Context) { _, _ = leases.Delete(ctx, &leasesapi.DeleteRequest{ID: lease.Lease.ID}) }(ctx)
	ctx = metadata.AppendToOutgoingContext(ctx, "containerd-lease", lease.Lease.ID)
	chainID, err := imageChainID(ctx, conn, c.Image)
	if err != nil {
		return 0, err
	}
	snap, err := snapshotsapi.NewSnapshotsClient(conn).Prepare(ctx, &snapshotsapi.PrepareSnapshotRequest{Snapshotter: snapshotter, Key: c.ID, Parent: chainID})
	if err != nil {
		return 0, fmt.Errorf("preparing the rootfs of %s: %w", c.ID, err)
	}
	if err := register(ctx, conn, c, c.ID, d.runcOptions()); err != nil {
		return 0, err
	}
	tasks := tasksapi.NewTasksClient(conn)
	created, err := tasks.Create(ctx, &tasksapi.CreateTaskRequest{ContainerID: c.ID, Rootfs: snap.Mounts})
	if err != nil {
		return 0, fmt.Errorf("creating the task of %s (runc): %w", c.ID, err)
	}
	if _, err := tasks.Start(ctx, &tasksapi.StartRequest{ContainerID: c.ID}); err != nil {
		return 0, fmt.Errorf("starting %s: %w", c.ID, err)
	}
	return int(created.Pid), nil
}

// Register creates the container's record only — labels, image and OCI
// spec, no rootfs and no task — as containerd holds it between the CRI
// plugin's CreateContainer and StartContainer. Discovery reads nothing
// more; Remove deletes it.
func (d *Daemon) Register(ctx context.Context, c Container) error {
	conn, ctx, err := d.client(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return register(ctx, conn, c, "", nil) // no task: no runtime options
}

// runcOptions are the shim's options for runc: the built runc, and its
// state below the daemon's directory instead of /run/containerd/runc.
func (d *Daemon) runcOptions() *anypb.Any {
	opts, err := proto.Marshal(&runcopts.Options{BinaryName: Binary("runc"), Root: filepath.Join(d.dir, "runc")})
	if err != nil {
		panic(err) // a fixed, valid message
	}
	return &anypb.Any{TypeUrl: "containerd.runc.v1.Options", Value: opts}
}

func register(ctx context.Context, conn *grpc.ClientConn, c Container, snapshotKey string, runc *anypb.Any) error {
	spec, err := json.Marshal(runtimeSpec(c))
	if err != nil {
		return err
	}
	ct := &containersapi.Container{
		ID: c.ID, Labels: c.Labels, Image: c.Image,
		Runtime: &containersapi.Container_Runtime{Name: "io.containerd.runc.v2", Options: runc},
		Spec:    &anypb.Any{TypeUrl: "types.containerd.io/opencontainers/runtime-spec/1/Spec", Value: spec},
	}
	if snapshotKey != "" {
		ct.Snapshotter, ct.SnapshotKey = snapshotter, snapshotKey
	}
	if _, err := containersapi.NewContainersClient(conn).Create(ctx, &containersapi.CreateContainerRequest{Container: ct}); err != nil {
		return fmt.Errorf("creating container %s: %w", c.ID, err)
	}
	return nil
}

// Remove kills the container's task and deletes the task, the container
// and its snapshot; runc removes the container's cgroup with the task.
func (d *Daemon) Remove(ctx context.Context, id string) error {
	conn, ctx, err := d.client(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	tasks := tasksapi.NewTasksClient(conn)
	var errs []error
	_, err = tasks.Kill(ctx, &tasksapi.KillRequest{ContainerID: id, Signal: uint32(syscall.SIGKILL), All: true})
	switch status.Code(err) {
	case codes.NotFound: // no task: nothing runs
	case codes.OK:
		waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err = tasks.Wait(waitCtx, &tasksapi.WaitRequest{ContainerID: id})
		cancel()
		errs = append(errs, err)
		_, err = tasks.Delete(ctx, &tasksapi.DeleteTaskRequest{ContainerID: id})
		errs = append(errs, err)
	default:
		return fmt.Errorf("killing container %s: %w", id, err)
	}
	_, err = containersapi.NewContainersClient(conn).Delete(ctx, &containersapi.DeleteContainerRequest{ID: id})
	errs = append(errs, err)
	_, err = snapshotsapi.NewSnapshotsClient(conn).Remove(ctx, &snapshotsapi.RemoveSnapshotRequest{Snapshotter: snapshotter, Key: id})
	if status.Code(err) != codes.NotFound { // a registered container has no snapshot
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("removing container %s: %w", id, err)
	}
	return nil
}

// imageChainID reads an image's manifest and config from containerd's
// content store and returns the chain id of its layers: the name of the
// committed snapshot a container's rootfs is prepared from.
func imageChainID(ctx context.Context, conn *grpc.ClientConn, ref string) (string, error) {
	img, err := imagesapi.NewImagesClient(conn).Get(ctx, &imagesapi.GetImageRequest{Name: ref})
	if err != nil {
		return "", fmt.Errorf("image %s: %w", ref, err)
	}
	content := contentapi.NewContentClient(conn)
	var manifest struct {
		Config struct{ Digest string } `json:"config"`
	}
	if err := readJSON(ctx, content, img.Image.Target.Digest, &manifest); err != nil {
		return "", fmt.Errorf("manifest of %s (a single-platform image is expected): %w", ref, err)
	}
	var config struct {
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	if err := readJSON(ctx, content, manifest.Config.Digest, &config); err != nil {
		return "", fmt.Errorf("config of %s: %w", ref, err)
	}
	if len(config.RootFS.DiffIDs) == 0 {
		return "", fmt.Errorf("image %s has no layers", ref)
	}
	// The OCI chain id: ChainID(L0) = DiffID(L0), ChainID(Ln) = sha256(ChainID(Ln-1) + " " + DiffID(Ln)).
	chain := config.RootFS.DiffIDs[0]
	for _, diff := range config.RootFS.DiffIDs[1:] {
		sum := sha256.Sum256([]byte(chain + " " + diff))
		chain = "sha256:" + hex.EncodeToString(sum[:])
	}
	return chain, nil
}

func readJSON(ctx context.Context, content contentapi.ContentClient, digest string, v any) error {
	stream, err := content.Read(ctx, &contentapi.ReadContentRequest{Digest: digest})
	if err != nil {
		return err
	}
	var data []byte
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		data = append(data, chunk.Data...)
	}
	return json.Unmarshal(data, v)
}

// runtimeSpec is a minimal OCI runtime spec for an unprivileged
// single-binary container: its own namespaces, no capabilities, no devices.
// It sets no oomScoreAdj: raising it needs CAP_SYS_RESOURCE, which some
// hosts deny even to root.
func runtimeSpec(c Container) *specs.Spec {
	shares := c.CPUShares
	return &specs.Spec{
		Version: "1.0.2",
		Process: &specs.Process{
			Args: c.Args, Cwd: "/", Env: []string{"PATH=/"},
			Capabilities:    &specs.LinuxCapabilities{},
			NoNewPrivileges: true,
		},
		Root:        &specs.Root{Path: "rootfs"},
		Hostname:    strings.ToLower(c.ID),
		Annotations: c.Annotations,
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
		},
		Linux: &specs.Linux{
			CgroupsPath: c.CgroupsPath,
			Resources: &specs.LinuxResources{
				Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}},
				CPU:     &specs.LinuxCPU{Shares: &shares},
			},
			Namespaces: []specs.LinuxNamespace{{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace}, {Type: specs.UTSNamespace},
				{Type: specs.MountNamespace}, {Type: specs.NetworkNamespace}},
			MaskedPaths:   []string{"/proc/kcore", "/proc/keys", "/proc/timer_list", "/sys/firmware"},
			ReadonlyPaths: []string{"/proc/sys", "/proc/sysrq-trigger"},
		},
	}
}
