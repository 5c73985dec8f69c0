package tritonjson

import (
	"math"
	"math/big"
	"math/bits"
)

// This file is the Grisu2 double-to-text conversion (Loitsch, "Printing
// floating-point numbers quickly and accurately with integers", PLDI 2010)
// with the digit-generation, rounding and layout choices RapidJSON's Writer
// makes. Grisu2 always round-trips but is not always the shortest
// representation; reproducing it (instead of strconv's shortest) keeps FP32
// and FP64 JSON output byte-identical to Triton's.

// diyFp is a floating-point value f × 2^e with a 64-bit significand.
type diyFp struct {
	f uint64
	e int
}

const (
	dpSignificandSize = 52
	dpExponentBias    = 0x3FF + dpSignificandSize
	dpMinExponent     = -dpExponentBias
	dpHiddenBit       = uint64(1) << dpSignificandSize
	dpSignificandMask = dpHiddenBit - 1
)

func diyFromFloat(d float64) diyFp {
	u := math.Float64bits(d)
	be := int(u >> dpSignificandSize & 0x7FF)
	sig := u & dpSignificandMask
	if be != 0 {
		return diyFp{sig + dpHiddenBit, be - dpExponentBias}
	}
	return diyFp{sig, dpMinExponent + 1}
}

// mul multiplies, rounding the low 64 bits of the product half-up.
func (x diyFp) mul(y diyFp) diyFp {
	h, l := bits.Mul64(x.f, y.f)
	if l&(1<<63) != 0 {
		h++
	}
	return diyFp{h, x.e + y.e + 64}
}

func (x diyFp) normalize() diyFp {
	s := bits.LeadingZeros64(x.f)
	return diyFp{x.f << s, x.e - s}
}

func (x diyFp) normalizeBoundary() diyFp {
	for x.f&(dpHiddenBit<<1) == 0 {
		x.f <<= 1
		x.e--
	}
	const shift = 64 - dpSignificandSize - 2
	return diyFp{x.f << shift, x.e - shift}
}

// boundaries returns the normalized neighbours m- and m+ halfway to the
// adjacent doubles, with the same exponent.
func (x diyFp) boundaries() (minus, plus diyFp) {
	plus = diyFp{x.f<<1 + 1, x.e - 1}.normalizeBoundary()
	if x.f == dpHiddenBit {
		minus = diyFp{x.f<<2 - 1, x.e - 2}
	} else {
		minus = diyFp{x.f<<1 - 1, x.e - 1}
	}
	minus.f <<= uint(minus.e - plus.e)
	minus.e = plus.e
	return minus, plus
}

// cachedPowers holds 10^k for k = -348, -340, ..., 340 as normalized diyFp,
// computed once from exact integer arithmetic and never modified.
var cachedPowers = func() (t [87]diyFp) {
	ten := big.NewInt(10)
	for i := range t {
		k := -348 + 8*i
		var f *big.Int
		var e int
		if k >= 0 {
			p := new(big.Int).Exp(ten, big.NewInt(int64(k)), nil)
			l := p.BitLen()
			if l > 64 {
				f, e = roundShift(p, uint(l-64)), l-64
			} else {
				f, e = p.Lsh(p, uint(64-l)), -(64 - l)
			}
		} else {
			den := new(big.Int).Exp(ten, big.NewInt(int64(-k)), nil)
			s := den.BitLen() + 63
			num := new(big.Int).Lsh(big.NewInt(1), uint(s))
			q, r := new(big.Int).QuoRem(num, den, new(big.Int))
			if r.Lsh(r, 1).Cmp(den) >= 0 {
				q.Add(q, big.NewInt(1))
			}
			f, e = q, -s
		}
		t[i] = diyFp{f.Uint64(), e}
	}
	return t
}()

// roundShift returns p / 2^s rounded to nearest (ties up).
func roundShift(p *big.Int, s uint) *big.Int {
	q := new(big.Int).Rsh(p, s)
	if p.Bit(int(s-1)) == 1 {
		q.Add(q, big.NewInt(1))
	}
	return q
}

// cachedPower returns c = 10^-K such that c×w lands in Grisu's target
// exponent range for a boundary with binary exponent e.
func cachedPower(e int) (diyFp, int) {
	// The explicit conversion keeps the product from being fused into
	// an FMA, so the ceiling matches the C++ expression bit for bit.
	dk := float64(float64(-61-e)*0.30102999566398114) + 347
	k := int(dk)
	if dk-float64(k) > 0 {
		k++
	}
	index := k>>3 + 1
	return cachedPowers[index], -(-348 + index<<3)
}

var pow10u32 = [...]uint32{1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000}

var pow10u64 = func() (t [20]uint64) {
	t[0] = 1
	for i := 1; i < len(t); i++ {
		t[i] = t[i-1] * 10
	}
	return t
}()

func countDecimalDigit32(n uint32) int {
	for d := 1; d < 9; d++ {
		if n < pow10u32[d] {
			return d
		}
	}
	return 9
}

func grisuRound(buf []byte, n int, delta, rest, tenKappa, wpW uint64) {
	for rest < wpW && delta-rest >= tenKappa &&
		(rest+tenKappa < wpW || wpW-rest > rest+tenKappa-wpW) {
		buf[n-1]--
		rest += tenKappa
	}
}

// digitGen writes the digits of W within [Mp-delta, Mp] and returns their
// count; *k receives the decimal exponent adjustment.
func digitGen(w, mp diyFp, delta uint64, buf []byte, k *int) int {
	oneE := uint(-mp.e)
	oneF := uint64(1) << oneE
	wpW := mp.f - w.f
	p1 := uint32(mp.f >> oneE)
	p2 := mp.f & (oneF - 1)
	kappa := countDecimalDigit32(p1)
	n := 0
	for kappa > 0 {
		div := pow10u32[kappa-1]
		d := p1 / div
		p1 %= div
		if d != 0 || n != 0 {
			buf[n] = byte('0' + d)
			n++
		}
		kappa--
		tmp := uint64(p1)<<oneE + p2
		if tmp <= delta {
			*k += kappa
			grisuRound(buf, n, delta, tmp, uint64(pow10u32[kappa])<<oneE, wpW)
			return n
		}
	}
	for {
		p2 *= 10
		delta *= 10
		d := byte(p2 >> oneE)
		if d != 0 || n != 0 {
			buf[n] = '0' + d
			n++
		}
		p2 &= oneF - 1
		kappa--
		if p2 < delta {
			*k += kappa
			// RapidJSON 1.1.0 indexes a 10-entry table here (reading past
			// its end for long outputs); later releases use 10^0..10^19 and
			// 0 beyond, which is what this reproduces.
			var scale uint64
			if -kappa < len(pow10u64) {
				scale = pow10u64[-kappa]
			}
			grisuRound(buf, n, delta, p2, oneF, wpW*scale)
			return n
		}
	}
}

// grisu2 writes the digits of v > 0 to buf and returns their count and the
// decimal exponent: v ≈ digits × 10^k.
func grisu2(v float64, buf []byte) (n, k int) {
	d := diyFromFloat(v)
	wm, wp := d.boundaries()
	c, k := cachedPower(wp.e)
	w := d.normalize().mul(c)
	mp := wp.mul(c)
	mm := wm.mul(c)
	mm.f++
	mp.f--
	n = digitGen(w, mp, mp.f-mm.f, buf, &k)
	return n, k
}

// appendExponent writes a decimal exponent without '+' or padding.
func appendExponent(dst []byte, k int) []byte {
	if k < 0 {
		dst = append(dst, '-')
		k = -k
	}
	if k >= 100 {
		dst = append(dst, byte('0'+k/100))
		k %= 100
		return append(dst, byte('0'+k/10), byte('0'+k%10))
	}
	if k >= 10 {
		return append(dst, byte('0'+k/10), byte('0'+k%10))
	}
	return append(dst, byte('0'+k))
}

// appendPrettified lays out digits × 10^k as RapidJSON's Prettify:
// integers below 1e21 as "123.0", 1e-6 <= v < 1e21 in plain decimal,
// anything else as "1.5e21" / "1e-7".
func appendPrettified(dst, digits []byte, k int) []byte {
	length := len(digits)
	kk := length + k // 10^(kk-1) <= v < 10^kk
	switch {
	case 0 <= k && kk <= 21:
		dst = append(dst, digits...)
		for i := length; i < kk; i++ {
			dst = append(dst, '0')
		}
		return append(dst, '.', '0')
	case 0 < kk && kk <= 21:
		dst = append(dst, digits[:kk]...)
		dst = append(dst, '.')
		return append(dst, digits[kk:]...)
	case -6 < kk && kk <= 0:
		dst = append(dst, '0', '.')
		for i := kk; i < 0; i++ {
			dst = append(dst, '0')
		}
		return append(dst, digits...)
	case length == 1:
		dst = append(dst, digits[0], 'e')
		return appendExponent(dst, kk-1)
	}
	dst = append(dst, digits[0], '.')
	dst = append(dst, digits[1:]...)
	dst = append(dst, 'e')
	return appendExponent(dst, kk-1)
}
