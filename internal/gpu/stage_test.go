package gpu

import "testing"

// TestStageRoundTripOnFake: see stageRoundTrip. The fake runs copies only
// when waited for, and refuses any async copy from memory that is not
// pinned.
func TestStageRoundTripOnFake(t *testing.T) {
	r := newRig(t, smallOpts(), fakeConfig{})
	stageRoundTrip(t, r.c, r)
}

// TestConcurrentStagesShareThePool: see stageConcurrently.
func TestConcurrentStagesShareThePool(t *testing.T) {
	r := newRig(t, sharedPoolOpts(), fakeConfig{})
	stageConcurrently(t, r.c, r)
}

// TestPoolPinnedOnce: see poolPinnedOnce, over two devices.
func TestPoolPinnedOnce(t *testing.T) {
	r := newRig(t, smallOpts(), fakeConfig{devices: 2})
	poolPinnedOnce(t, r.c, r, 2)
}

// TestBadRequestsOnFake: see badRequests.
func TestBadRequestsOnFake(t *testing.T) {
	r := newRig(t, smallOpts(), fakeConfig{})
	badRequests(t, r.c, r)
}
