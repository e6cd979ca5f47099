// Package kernel boots kubefair's patched Linux 6.12 and the same kernel
// unpatched under QEMU (TCG; KVM is not needed) with a busybox initramfs,
// runs the sched_setweight selftests inside, and reads their TAP output
// from the serial console. `make kernel` builds both kernels.
package kernel

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kubefair/kubefair/test/harness/kubeapi"
)

func bzImage(t *testing.T, flavour string) string {
	p := filepath.Join(kubeapi.CacheDir(), "kernel", flavour, "arch", "x86", "boot", "bzImage")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no %s kernel at %s: run `make kernel`", flavour, p)
	}
	return p
}

// initramfs packs busybox, an /init script and the static test programs.
func initramfs(t *testing.T, initScript string, programs map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"bin", "proc", "sys", "dev", "tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		t.Fatal("busybox (Debian busybox-static) is missing: run hack/deps.sh")
	}
	copyFile(t, busybox, filepath.Join(root, "bin", "busybox"), 0o755)
	for _, applet := range []string{"sh", "mount", "reboot", "echo", "cat"} {
		if err := os.Symlink("busybox", filepath.Join(root, "bin", applet)); err != nil {
			t.Fatal(err)
		}
	}
	for name, src := range programs {
		copyFile(t, src, filepath.Join(root, name), 0o755)
	}
	if err := os.WriteFile(filepath.Join(root, "init"), []byte(initScript), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "initramfs.cpio")
	cmd := exec.Command("sh", "-c", "find . | cpio -o -H newc --quiet > "+out)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("packing the initramfs: %v %s", err, b)
	}
	return out
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, mode); err != nil {
		t.Fatal(err)
	}
}

// compile builds a static C program from kernel/selftests.
func compile(t *testing.T, source string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(source), ".c"))
	cmd := exec.Command("gcc", "-static", "-O2", "-pthread", "-Wall", "-Werror", "-o", out,
		filepath.Join(kubeapi.RepoRoot(), "kernel", "selftests", source), "-lm")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("compiling %s: %v\n%s", source, err, b)
	}
	return out
}

// boot runs the kernel with the initramfs and returns the serial console.
func boot(t *testing.T, kernel, initrd string, timeout time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "qemu-system-x86_64",
		"-accel", "tcg,thread=multi", "-smp", "2", "-m", "256",
		"-kernel", kernel, "-initrd", initrd,
		"-append", "console=ttyS0 panic=-1 quiet",
		"-nographic", "-no-reboot", "-nodefaults", "-serial", "stdio")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("the guest did not finish within %s; console:\n%s", timeout, out)
	}
	if err != nil {
		t.Fatalf("qemu: %v\n%s", err, out)
	}
	return strings.ReplaceAll(string(out), "\r", "")
}

var tapLine = regexp.MustCompile(`^(not ok|ok) (\d+) (.*)$`)

// checkTAP fails the test for every "not ok" and unless the plan was seen.
func checkTAP(t *testing.T, console string) (passed int) {
	t.Helper()
	plan := false
	sc := bufio.NewScanner(strings.NewReader(console))
	for sc.Scan() {
		line := sc.Text()
		if m := tapLine.FindStringSubmatch(line); m != nil {
			if m[1] == "ok" {
				passed++
				t.Logf("guest: %s", line)
			} else {
				t.Errorf("guest: %s", line)
			}
		}
		if strings.HasPrefix(line, "1..") {
			plan = true
		}
	}
	if !plan || passed == 0 {
		t.Fatalf("the guest did not report a complete TAP run; console:\n%s", console)
	}
	return passed
}

const initTemplate = `#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
echo KUBEFAIR-GUEST-UP
%s
echo KUBEFAIR-GUEST-DONE
reboot -f
`

// TestSyscallInPatchedKernel runs every selftest in the patched kernel.
func TestSyscallInPatchedKernel(t *testing.T) {
	test := compile(t, "sched_weight_test.c")
	initrd := initramfs(t, fmt.Sprintf(initTemplate, "/sched_weight_test"), map[string]string{"sched_weight_test": test})
	console := boot(t, bzImage(t, "patched"), initrd, 5*time.Minute)
	if n := checkTAP(t, console); n < 20 {
		t.Errorf("only %d selftests passed, want all of them (≥ 20)", n)
	}
}

// TestStockKernelHasNoSyscall: the unpatched kernel built from the same
// source has neither the probe file nor the calls (ENOSYS).
func TestStockKernelHasNoSyscall(t *testing.T) {
	test := compile(t, "sched_weight_test.c")
	initrd := initramfs(t, fmt.Sprintf(initTemplate, "/sched_weight_test --stock"), map[string]string{"sched_weight_test": test})
	console := boot(t, bzImage(t, "stock"), initrd, 3*time.Minute)
	if n := checkTAP(t, console); n != 3 {
		t.Errorf("%d stock checks passed, want 3", n)
	}
}

// backendTest builds the thread backend's test binary, static, for the guest.
func backendTest(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "threads.test")
	cmd := exec.Command("go", "test", "-c", "-tags", "kubefair_guest", "-o", out, "./node-agent/enforce/threads")
	cmd.Dir = kubeapi.RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the backend test: %v\n%s", err, b)
	}
	return out
}

// TestThreadBackendInGuests runs the agent's thread backend inside both
// kernels: the syscall backend in the patched one, the nice fallback in the
// stock one, each making a 1-thread and an 8-thread process share a CPU
// process-fairly.
func TestThreadBackendInGuests(t *testing.T) {
	bin := backendTest(t)
	for _, flavour := range []string{"patched", "stock"} {
		t.Run(flavour, func(t *testing.T) {
			script := fmt.Sprintf("KUBEFAIR_IN_GUEST=%s /threads.test -test.v -test.count=1 -test.run 'TestProbeOnThisKernel|TestPFS$'; echo KUBEFAIR-RC=$?", flavour)
			console := boot(t, bzImage(t, flavour), initramfs(t, fmt.Sprintf(initTemplate, script), map[string]string{"threads.test": bin}), 5*time.Minute)
			for _, line := range strings.Split(console, "\n") {
				if strings.Contains(line, "threads_test.go") || strings.HasPrefix(line, "--- ") {
					t.Logf("guest: %s", strings.TrimSpace(line))
				}
			}
			if !strings.Contains(console, "KUBEFAIR-RC=0") || !strings.Contains(console, "--- PASS: TestPFS") {
				t.Fatalf("the backend test failed in the %s guest; console:\n%s", flavour, console)
			}
		})
	}
}

// s0Row is one line of kernel/selftests/s0.c's output.
type s0Row struct {
	mode         string
	k            int
	a, b, c, gap float64
}

func parseS0(console string) []s0Row {
	var rows []s0Row
	for _, line := range strings.Split(console, "\n") {
		var r s0Row
		if n, _ := fmt.Sscanf(strings.TrimSpace(line), "S0 %s %d %f %f %f %f", &r.mode, &r.k, &r.a, &r.b, &r.c, &r.gap); n == 6 {
			rows = append(rows, r)
		}
	}
	return rows
}

// TestS0 runs the thesis's S0 experiment in both kernels: processes with 1,
// 8 and k threads on one CPU. Stock Linux shares by thread; process-fair
// weights set with sched_setweight give each process a third, even at 200
// threads where nice levels run out; nice-level PFS is shown beside them.
func TestS0(t *testing.T) {
	prog := compile(t, "s0.c")
	ks := "10 30 50 200"
	run := func(flavour string, modes ...string) []s0Row {
		var script strings.Builder
		for _, m := range modes {
			fmt.Fprintf(&script, "/s0 %s %s\n", m, ks)
		}
		console := boot(t, bzImage(t, flavour), initramfs(t, fmt.Sprintf(initTemplate, script.String()), map[string]string{"s0": prog}), 8*time.Minute)
		rows := parseS0(console)
		if len(rows) != len(modes)*len(strings.Fields(ks)) {
			t.Fatalf("%s guest printed %d S0 rows; console:\n%s", flavour, len(rows), console)
		}
		return rows
	}
	patched := run("patched", "stock", "weight", "nice")
	stock := run("stock", "stock", "nice")

	var table strings.Builder
	fmt.Fprintf(&table, "\nS0 on one CPU (4 s windows): share of processes A, B, C with 1, 8, k threads\n%-8s %-7s %4s %6s %6s %6s %8s\n", "kernel", "weights", "k", "A", "B", "C", "gap(pp)")
	for _, r := range patched {
		fmt.Fprintf(&table, "%-8s %-7s %4d %5.1f%% %5.1f%% %5.1f%% %8.1f\n", "patched", r.mode, r.k, r.a, r.b, r.c, r.gap)
	}
	for _, r := range stock {
		fmt.Fprintf(&table, "%-8s %-7s %4d %5.1f%% %5.1f%% %5.1f%% %8.1f\n", "stock", r.mode, r.k, r.a, r.b, r.c, r.gap)
	}
	fmt.Print(table.String())

	for _, r := range patched {
		switch r.mode {
		case "weight":
			for _, s := range []float64{r.a, r.b, r.c} {
				if s < 33.3-2 || s > 33.3+2 {
					t.Errorf("patched, PFS by sched_setweight, k=%d: %.1f/%.1f/%.1f, want 33.3 %% ± 2 each", r.k, r.a, r.b, r.c)
					break
				}
			}
		case "stock": // by thread: A gets 1/(9+k), the gap is 47 points at k = 10
			if r.gap < 40 {
				t.Errorf("stock weights, k=%d: gap only %.1f points; the experiment does not contend", r.k, r.gap)
			}
		}
	}
}

// TestOverhead prints the patch's cost beside the stock kernel's from the
// same run: system call costs, and a hackbench-like pipe messaging run in
// each kernel (best of 5). Under TCG the absolute figures are emulated;
// the comparison is what counts. It asserts that every figure was measured.
func TestOverhead(t *testing.T) {
	prog := compile(t, "overhead.c")
	measure := func(flavour, args string) map[string]float64 {
		console := boot(t, bzImage(t, flavour), initramfs(t, fmt.Sprintf(initTemplate, "/overhead "+args), map[string]string{"overhead": prog}), 5*time.Minute)
		out := map[string]float64{}
		for _, line := range strings.Split(console, "\n") {
			var name, unit string
			var v float64
			if n, _ := fmt.Sscanf(strings.TrimSpace(line), "OVERHEAD %s %f %s", &name, &v, &unit); n == 3 && v > 0 {
				out[name] = v
			}
		}
		return out
	}
	patched, stock := measure("patched", ""), measure("stock", "--stock")
	for _, k := range []string{"getppid", "sched_getweight", "sched_setweight", "messaging"} {
		if patched[k] == 0 {
			t.Fatalf("the patched guest did not measure %s: %v", k, patched)
		}
	}
	if stock["getppid"] == 0 || stock["messaging"] == 0 {
		t.Fatalf("the stock guest did not measure: %v", stock)
	}
	fmt.Printf("\noverhead (QEMU TCG, -smp 2)\n%-22s %10s %10s\n", "", "patched", "stock")
	fmt.Printf("%-22s %8.0f ns %8.0f ns\n", "getppid()", patched["getppid"], stock["getppid"])
	fmt.Printf("%-22s %8.0f ns %11s\n", "sched_getweight()", patched["sched_getweight"], "ENOSYS")
	fmt.Printf("%-22s %8.0f ns %11s\n", "sched_setweight()", patched["sched_setweight"], "ENOSYS")
	fmt.Printf("%-22s %9.3f s %9.3f s  (patched/stock %.3f)\n", "messaging 2×20×20×100", patched["messaging"], stock["messaging"], patched["messaging"]/stock["messaging"])
}
