package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// cacheTimeout is how long the kernel may trust an entry or attributes without asking.
// Every change goes through the mount, which keeps the kernel's view right, so a second
// only saves Kafka's frequent stats; negative entries are not cached, so a file created
// in the backing dir directly is seen at once.
const cacheTimeout = time.Second

// defaultWritebackS is Linux's default dirty_expire_centisecs (30 s): how long a real
// machine leaves a file's unsynced writes in memory before writing them back.
const defaultWritebackS = 30

// serveConfig is what `chaosfs serve` is asked to do.
type serveConfig struct {
	backing, mount, control string
	writebackS              int64 // seconds a file stays dirty before it is written back; 0: never
}

// serveMain mounts the file system and serves it until SIGTERM or SIGINT.
func serveMain(args []string, stdout, stderr io.Writer) int {
	cfg, ok := parseServe(args, stderr)
	if !ok {
		return 2
	}
	if err := serve(cfg, stdout); err != nil {
		fmt.Fprintf(stderr, "chaosfs serve: %v\n", err)
		return 1
	}
	return 0
}

// parseServe parses serve's flags; false (the problem printed to stderr) for a usage error.
func parseServe(args []string, stderr io.Writer) (serveConfig, bool) {
	flags := flag.NewFlagSet("serve", flag.ContinueOnError)
	flags.SetOutput(stderr)
	var cfg serveConfig
	flags.StringVar(&cfg.backing, "backing", "", "the directory that holds the data")
	flags.StringVar(&cfg.mount, "mount", "", "the (empty) directory to mount the file system on")
	flags.StringVar(&cfg.control, "control", "", "the unix socket to take commands on")
	flags.Int64Var(&cfg.writebackS, "writeback-s", defaultWritebackS,
		"write a file back (count it synced) once dirty this many seconds, 0..3600; 0: never")
	if err := flags.Parse(args); err != nil {
		return cfg, false
	}
	if cfg.backing == "" || cfg.mount == "" || cfg.control == "" || flags.NArg() > 0 {
		fmt.Fprint(stderr, "chaosfs serve: --backing, --mount and --control are required\n"+usageText)
		return cfg, false
	}
	if cfg.writebackS < 0 || cfg.writebackS > maxWritebackS {
		fmt.Fprintf(stderr, "chaosfs serve: --writeback-s takes seconds 0..%d, not %d\n",
			maxWritebackS, cfg.writebackS)
		return cfg, false
	}
	return cfg, true
}

// serve mounts cfg.backing at cfg.mount, answers commands on cfg.control, writes dirty
// files back as they age, prints the serving line once the mount is usable, and unmounts
// on SIGTERM or SIGINT.
func serve(cfg serveConfig, stdout io.Writer) error {
	root, err := resolveDir(cfg.backing)
	if err != nil {
		return err
	}
	listener, err := listenControl(cfg.control)
	if err != nil {
		return err
	}
	defer os.Remove(cfg.control)
	defer listener.Close()

	c := newChaosFS(root, cfg.writebackS, time.Now)
	mount := cfg.mount
	server, err := mountFS(c, mount)
	if err != nil {
		return err
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go c.serveControl(listener)
	stop := make(chan struct{})
	defer close(stop)
	go c.writebackLoop(stop)
	fmt.Fprintf(stdout, "chaosfs: serving %s\n", mount)

	served := make(chan struct{})
	go func() { server.Wait(); close(served) }()
	select {
	case <-signals:
		return unmount(server, mount)
	case <-served: // unmounted from outside (umount, fusermount -u)
		return nil
	}
}

// resolveDir is the absolute path of an existing directory, symlinks resolved, so the
// paths the kernel names for open files start with it.
func resolveDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		return "", fmt.Errorf("backing dir: %w", err)
	}
	if info, err := os.Stat(abs); err != nil || !info.IsDir() {
		return "", fmt.Errorf("backing dir %s is not a directory", dir)
	}
	return abs, nil
}

// listenControl listens on the control socket, first removing a stale socket file left
// by a chaosfs that died; a socket that still answers belongs to a live one: an error.
func listenControl(path string) (net.Listener, error) {
	if info, err := os.Lstat(path); err == nil {
		if info.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("control path %s exists and is not a socket", path)
		}
		if conn, err := net.DialTimeout("unix", path, time.Second); err == nil {
			conn.Close()
			return nil, fmt.Errorf("control socket %s is in use by a running chaosfs", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("removing the stale control socket: %w", err)
		}
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	return l, nil
}

// mountFS mounts the chaosfs loopback of c.backing at `mount` and starts serving it;
// mount(2) directly (root with CAP_SYS_ADMIN), else through fusermount.
func mountFS(c *chaosFS, mount string) (*fuse.Server, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(c.backing, &st); err != nil {
		return nil, err
	}
	loopback := &fs.LoopbackRoot{Path: c.backing, Dev: uint64(st.Dev), NewNode: c.newNode}
	rootNode := c.newNode(loopback, nil, "", &st)
	loopback.RootNode = rootNode

	entry, attr, negative := cacheTimeout, cacheTimeout, time.Duration(0)
	opts := &fs.Options{
		EntryTimeout: &entry, AttrTimeout: &attr, NegativeTimeout: &negative,
		MountOptions: fuse.MountOptions{
			AllowOther:  true,
			DirectMount: true, // falls back to fusermount when mount(2) is refused
			FsName:      "chaosfs",
			Name:        "chaosfs",
			Debug:       os.Getenv("CHAOSFS_DEBUG") != "",
		},
	}
	raw := &gate{RawFileSystem: fs.NewNodeFS(rootNode, opts), c: c}
	server, err := fuse.NewServer(raw, mount, &opts.MountOptions)
	if err != nil {
		return nil, fmt.Errorf("mounting %s: %w", mount, err)
	}
	go server.Serve()
	if err := server.WaitMount(); err != nil {
		return nil, fmt.Errorf("mounting %s: %w", mount, err)
	}
	return server, nil
}

// unmount unmounts and waits for the server to stop; if the mount is busy, it is detached
// lazily (it goes once its last user leaves) and chaosfs exits without waiting.
func unmount(server *fuse.Server, mount string) error {
	err := server.Unmount()
	if err == nil {
		return nil
	}
	if lazy := unix.Unmount(mount, unix.MNT_DETACH); lazy != nil {
		return errors.Join(err, fmt.Errorf("lazy unmount: %w", lazy))
	}
	return nil
}
