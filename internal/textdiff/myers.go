package textdiff

import "math"

// minCostLimit is the smallest number of edit steps the middle-snake search
// may take before it settles for a good rather than an optimal split point.
const minCostLimit = 256

// changes marks the lines of a and b that a shortest (or, on very costly
// inputs, a short) edit script removes from a and adds to b. Lines that are
// not marked pair up in order: a's unmarked lines equal b's unmarked lines.
func changes(a, b []string) (ca, cb []bool) {
	ca = make([]bool, len(a))
	cb = make([]bool, len(b))

	// Give every distinct line a small integer id.
	ids := make(map[string]int, len(a)+len(b))
	ia := make([]int, len(a))
	ib := make([]int, len(b))
	for i, s := range a {
		id, ok := ids[s]
		if !ok {
			id = len(ids)
			ids[s] = id
		}
		ia[i] = id
	}
	for i, s := range b {
		id, ok := ids[s]
		if !ok {
			id = len(ids)
			ids[s] = id
		}
		ib[i] = id
	}

	// A line with no equal on the other side is changed in every edit
	// script, so it can be set aside: the longest common subsequence of
	// what remains is the longest common subsequence of the whole.
	inA := make([]bool, len(ids))
	inB := make([]bool, len(ids))
	for _, id := range ia {
		inA[id] = true
	}
	for _, id := range ib {
		inB[id] = true
	}
	ra, pa := keep(ia, inB, ca)
	rb, pb := keep(ib, inA, cb)

	m := &myers{a: ra, b: rb, ca: make([]bool, len(ra)), cb: make([]bool, len(rb))}
	m.off = len(rb) + 1
	m.kf = make([]int, len(ra)+len(rb)+3)
	m.kb = make([]int, len(ra)+len(rb)+3)
	m.maxCost = int(math.Sqrt(float64(len(ra) + len(rb))))
	if m.maxCost < minCostLimit {
		m.maxCost = minCostLimit
	}
	m.compare(0, len(ra), 0, len(rb))

	for i, c := range m.ca {
		if c {
			ca[pa[i]] = true
		}
	}
	for i, c := range m.cb {
		if c {
			cb[pb[i]] = true
		}
	}
	return ca, cb
}

// keep returns the ids whose line also occurs on the other side, with their
// positions in ids; the others are marked in changed.
func keep(ids []int, other []bool, changed []bool) (kept, pos []int) {
	kept = make([]int, 0, len(ids))
	pos = make([]int, 0, len(ids))
	for i, id := range ids {
		if other[id] {
			kept = append(kept, id)
			pos = append(pos, i)
		} else {
			changed[i] = true
		}
	}
	return kept, pos
}

// myers is the linear-space variant of Myers' O(ND) difference algorithm:
// find the middle snake of an optimal edit path, split there, recurse.
type myers struct {
	a, b    []int
	ca, cb  []bool
	kf, kb  []int // furthest x reached per diagonal k = x-y, at index k+off
	off     int
	maxCost int
}

const (
	noForward  = -1
	noBackward = math.MaxInt
)

// compare marks the changed lines of a[alo:ahi] against b[blo:bhi].
func (m *myers) compare(alo, ahi, blo, bhi int) {
	for {
		for alo < ahi && blo < bhi && m.a[alo] == m.b[blo] {
			alo++
			blo++
		}
		for alo < ahi && blo < bhi && m.a[ahi-1] == m.b[bhi-1] {
			ahi--
			bhi--
		}
		if alo == ahi || blo == bhi {
			for i := alo; i < ahi; i++ {
				m.ca[i] = true
			}
			for j := blo; j < bhi; j++ {
				m.cb[j] = true
			}
			return
		}
		x, y := m.split(alo, ahi, blo, bhi)
		if x+y <= alo+blo || x+y >= ahi+bhi || x < alo || x > ahi || y < blo || y > bhi {
			// No usable split point: replacing the whole range is still
			// a correct, if coarse, answer.
			for i := alo; i < ahi; i++ {
				m.ca[i] = true
			}
			for j := blo; j < bhi; j++ {
				m.cb[j] = true
			}
			return
		}
		// Recurse on the smaller half, loop on the other.
		if (x-alo)+(y-blo) < (ahi-x)+(bhi-y) {
			m.compare(alo, x, blo, y)
			alo, blo = x, y
		} else {
			m.compare(x, ahi, y, bhi)
			ahi, bhi = x, y
		}
	}
}

// split returns a point (x, y) on a shortest edit path from (alo, blo) to
// (ahi, bhi), strictly between the two, or, once the search has cost more
// than maxCost steps, the point that got furthest.
func (m *myers) split(alo, ahi, blo, bhi int) (int, int) {
	a, b, kf, kb, o := m.a, m.b, m.kf, m.kb, m.off
	kmin, kmax := alo-bhi, ahi-blo
	fmid, bmid := alo-blo, ahi-bhi
	odd := (fmid-bmid)&1 != 0
	fmin, fmax, bmin, bmax := fmid, fmid, bmid, bmid
	kf[fmid+o] = alo
	kb[bmid+o] = ahi

	for d := 1; ; d++ {
		// Forward: one more step from (alo, blo).
		if fmin > kmin {
			fmin--
			kf[fmin-1+o] = noForward
		} else {
			fmin++
		}
		if fmax < kmax {
			fmax++
			kf[fmax+1+o] = noForward
		} else {
			fmax--
		}
		for k := fmax; k >= fmin; k -= 2 {
			x := noForward
			if r := kf[k-1+o]; r != noForward && r < ahi {
				x = r + 1 // delete a[r]
			}
			if s := kf[k+1+o]; s != noForward && s-(k+1) < bhi && s > x {
				x = s // insert b[s-k-1]
			}
			kf[k+o] = x
			if x == noForward {
				continue
			}
			y := x - k
			for x < ahi && y < bhi && a[x] == b[y] {
				x++
				y++
			}
			kf[k+o] = x
			if odd && bmin <= k && k <= bmax && kb[k+o] <= x {
				return x, y
			}
		}

		// Backward: one more step from (ahi, bhi).
		if bmin > kmin {
			bmin--
			kb[bmin-1+o] = noBackward
		} else {
			bmin++
		}
		if bmax < kmax {
			bmax++
			kb[bmax+1+o] = noBackward
		} else {
			bmax--
		}
		for k := bmax; k >= bmin; k -= 2 {
			x := noBackward
			if s := kb[k+1+o]; s != noBackward && s > alo {
				x = s - 1 // delete a[s-1]
			}
			if r := kb[k-1+o]; r != noBackward && r-(k-1) > blo && r < x {
				x = r // insert b[r-k]
			}
			kb[k+o] = x
			if x == noBackward {
				continue
			}
			y := x - k
			for x > alo && y > blo && a[x-1] == b[y-1] {
				x--
				y--
			}
			kb[k+o] = x
			if !odd && fmin <= k && k <= fmax && x <= kf[k+o] && kf[k+o] != noForward {
				return x, y
			}
		}

		if d >= m.maxCost {
			return m.furthest(alo, ahi, blo, bhi, fmin, fmax, bmin, bmax)
		}
	}
}

// furthest picks, among the forward and backward frontiers, the point that
// has made the most progress from its own corner.
func (m *myers) furthest(alo, ahi, blo, bhi, fmin, fmax, bmin, bmax int) (int, int) {
	kf, kb, o := m.kf, m.kb, m.off
	fx, fy, fbest := -1, -1, -1
	for k := fmax; k >= fmin; k -= 2 {
		x := kf[k+o]
		if x == noForward {
			continue
		}
		y := x - k
		if x+y < ahi+bhi && x+y-alo-blo > fbest {
			fx, fy, fbest = x, y, x+y-alo-blo
		}
	}
	bx, by, bbest := -1, -1, -1
	for k := bmax; k >= bmin; k -= 2 {
		x := kb[k+o]
		if x == noBackward {
			continue
		}
		y := x - k
		if x+y > alo+blo && ahi+bhi-x-y > bbest {
			bx, by, bbest = x, y, ahi+bhi-x-y
		}
	}
	if fbest >= bbest {
		return fx, fy
	}
	return bx, by
}
