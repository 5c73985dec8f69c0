package shm

/*
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

// The guard's ranges: [start, end) of the guarded mappings, read by the
// signal handler without a lock. A slot is claimed through used, then
// published by storing start last; it is retired by clearing start first.
#define INFERD_SHM_SLOTS 4096

typedef struct {
	uintptr_t start, end;
	uint64_t faults;
	int used;
} inferd_shm_range;

static inferd_shm_range inferd_shm_ranges[INFERD_SHM_SLOTS];
static struct sigaction inferd_shm_old;
static uintptr_t inferd_shm_page;
static int inferd_shm_state; // 0 not installed, 1 installing, 2 installed, 3 failed
static int inferd_shm_errno;

static void inferd_shm_handler(int sig, siginfo_t* info, void* ctx) {
	uintptr_t a = (uintptr_t)info->si_addr;
	for (int i = 0; i < INFERD_SHM_SLOTS; i++) {
		uintptr_t s = __atomic_load_n(&inferd_shm_ranges[i].start, __ATOMIC_ACQUIRE);
		if (s == 0 || a < s || a >= __atomic_load_n(&inferd_shm_ranges[i].end, __ATOMIC_RELAXED)) continue;
		// A page of the object is gone (truncated): map a private zero
		// page in its place, so that the access that faulted, and any
		// later one, completes; the region is broken from now on.
		void* p = (void*)(a & ~(inferd_shm_page - 1));
		int saved = errno;
		void* r = mmap(p, inferd_shm_page, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		errno = saved;
		if (r == MAP_FAILED) break;
		__atomic_add_fetch(&inferd_shm_ranges[i].faults, 1, __ATOMIC_RELEASE);
		return;
	}
	// Not ours: Go's handler (a fault in Go code, SetPanicOnFault, the
	// crash report) as if the guard were not there.
	if (inferd_shm_old.sa_flags & SA_SIGINFO) {
		inferd_shm_old.sa_sigaction(sig, info, ctx);
		return;
	}
	if (inferd_shm_old.sa_handler != SIG_DFL && inferd_shm_old.sa_handler != SIG_IGN) {
		inferd_shm_old.sa_handler(sig);
		return;
	}
	// Default action: the faulting access runs again and kills the process.
	signal(sig, SIG_DFL);
}

// inferd_shm_install installs the handler once, in front of the one in
// place (Go's); it returns 0 or an errno.
static int inferd_shm_install(void) {
	int expect = 0;
	if (__atomic_compare_exchange_n(&inferd_shm_state, &expect, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		int err = 0;
		inferd_shm_page = (uintptr_t)sysconf(_SC_PAGESIZE);
		if (sigaction(SIGBUS, NULL, &inferd_shm_old) != 0) {
			err = errno;
		} else {
			struct sigaction sa;
			memset(&sa, 0, sizeof sa);
			sa.sa_sigaction = inferd_shm_handler;
			sa.sa_mask = inferd_shm_old.sa_mask;
			sa.sa_flags = (inferd_shm_old.sa_flags & ~SA_RESETHAND) | SA_SIGINFO | SA_ONSTACK;
			if (sigaction(SIGBUS, &sa, NULL) != 0) err = errno;
		}
		inferd_shm_errno = err;
		__atomic_store_n(&inferd_shm_state, err ? 3 : 2, __ATOMIC_RELEASE);
		return err;
	}
	while (__atomic_load_n(&inferd_shm_state, __ATOMIC_ACQUIRE) == 1) usleep(100);
	return inferd_shm_errno;
}

static int inferd_shm_installed(void) {
	return __atomic_load_n(&inferd_shm_state, __ATOMIC_ACQUIRE) == 2;
}

// inferd_shm_add guards [start, end) and returns its slot, -1 when the
// table is full.
static int inferd_shm_add(uintptr_t start, uintptr_t end) {
	for (int i = 0; i < INFERD_SHM_SLOTS; i++) {
		int expect = 0;
		if (!__atomic_compare_exchange_n(&inferd_shm_ranges[i].used, &expect, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) continue;
		__atomic_store_n(&inferd_shm_ranges[i].faults, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&inferd_shm_ranges[i].end, end, __ATOMIC_RELAXED);
		__atomic_store_n(&inferd_shm_ranges[i].start, start, __ATOMIC_RELEASE);
		return i;
	}
	return -1;
}

static void inferd_shm_remove(int slot) {
	__atomic_store_n(&inferd_shm_ranges[slot].start, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&inferd_shm_ranges[slot].end, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&inferd_shm_ranges[slot].used, 0, __ATOMIC_RELEASE);
}

static uint64_t inferd_shm_faults(int slot) {
	return __atomic_load_n(&inferd_shm_ranges[slot].faults, __ATOMIC_ACQUIRE);
}
*/
import "C"

import (
	"fmt"
	"os"
	"syscall"
	"unsafe"
)

// InstallGuard installs the process's SIGBUS guard, once whoever calls it,
// and has m register its system regions' mappings with it from now on:
// their bytes may then be handed to backends in place (Span.Data). The
// guard is a C signal handler in front of Go's: a fault inside a guarded
// mapping (its object was truncated) gets a private zero page in place of
// the lost one, so that the access, from Go or from a C library's thread,
// completes; the region counts the fault and every later use of it fails
// with the truncation error. Any other SIGBUS goes to Go's handler, so
// runtime/debug.SetPanicOnFault and Go's crash reports behave as before.
// Nothing may reinstall SIGBUS's handler afterwards (os/signal.Notify of
// SIGBUS would): the guard would be gone.
func (m *Manager) InstallGuard() error {
	if errno := C.inferd_shm_install(); errno != 0 {
		return fmt.Errorf("shm: installing the SIGBUS handler: %w", syscall.Errno(errno))
	}
	m.mu.Lock()
	m.guarded = true
	m.mu.Unlock()
	return nil
}

// guard is a mapping's slot in the guard's table; noGuard for a mapping
// that is not guarded.
type guard int

const noGuard guard = -1

// guardRange guards mem, whole pages; noGuard when the table is full.
func guardRange(mem []byte) guard {
	if len(mem) == 0 || C.inferd_shm_installed() == 0 {
		return noGuard
	}
	page := uintptr(os.Getpagesize())
	start := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
	end := (start + uintptr(len(mem)) + page - 1) &^ (page - 1)
	return guard(C.inferd_shm_add(C.uintptr_t(start), C.uintptr_t(end)))
}

// release stops guarding; call it before unmapping.
func (g guard) release() {
	if g != noGuard {
		C.inferd_shm_remove(C.int(g))
	}
}

// faulted reports whether a guarded mapping has lost a page.
func (g guard) faulted() bool {
	return g != noGuard && C.inferd_shm_faults(C.int(g)) != 0
}
