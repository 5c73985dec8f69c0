package tritonjson

import "math"

// parseNumber validates a number the way RapidJSON 1.1.0's ParseNumber does
// (kParseNanAndInfFlag, normal precision) and records its class; the value
// itself is decoded on access. The counters of numScan mirror RapidJSON's
// only where they decide an error (the "too big" exponent bound).
func (p *parser) parseNumber() error {
	n := numScan{p: p, start: p.pos, i: p.pos}
	n.minus = p.at(n.i) == '-'
	if n.minus {
		n.i++
	}
	if err := n.integer(); err != nil {
		return err
	}
	if p.at(n.i) == '.' {
		if err := n.fraction(); err != nil {
			return err
		}
	}
	if c := p.at(n.i); c == 'e' || c == 'E' {
		if err := n.exponent(); err != nil {
			return err
		}
	}
	p.nodes = append(p.nodes, node{kind: KindNumber, flags: n.flags(), off: uint32(n.start), n: uint32(n.i - n.start)})
	p.pos = n.i
	return nil
}

// numScan is one number's scan: where it is and RapidJSON's counters.
type numScan struct {
	p          *parser
	start, i   int
	minus      bool
	i64        uint64 // integer part while it fits
	useDouble  bool   // integer part overflowed uint64 / int64 magnitude
	special    uint8  // numNaN or numInf
	sigDigits  int    // RapidJSON's significandDigit
	positive   bool   // RapidJSON's d > 0.0 after the integer part
	hasFracExp bool
	expFrac    int
}

// integer scans the integer part, or NaN or Inf.
func (n *numScan) integer() error {
	p := n.p
	c := p.at(n.i)
	switch {
	case c == '0':
		n.i++
	case c >= '1' && c <= '9':
		n.i64 = uint64(c - '0')
		n.i++
		for isDigit(p.at(n.i)) {
			dg := uint64(p.at(n.i) - '0')
			if n.minus {
				if n.i64 > 922337203685477580 || (n.i64 == 922337203685477580 && dg > 8) {
					n.useDouble = true
					break
				}
			} else if n.i64 > 1844674407370955161 || (n.i64 == 1844674407370955161 && dg > 5) {
				n.useDouble = true
				break
			}
			n.i64 = n.i64*10 + dg
			n.sigDigits++
			n.i++
		}
		if n.useDouble {
			// RapidJSON accumulates the remaining digits in a double and
			// gives up once it could overflow.
			d := float64(n.i64)
			for isDigit(p.at(n.i)) {
				if d >= 1.7976931348623157e307 {
					return parseError(reasonNumberTooBig, n.start)
				}
				d = d*10 + float64(p.at(n.i)-'0')
				n.i++
			}
		}
		n.positive = true
	case c == 'N' || c == 'I':
		return n.nanInf()
	default:
		return parseError(reasonValueInvalid, n.i)
	}
	return nil
}

// nanInf scans NaN, Inf and Infinity as RapidJSON 1.1.0 does: (N && a &&
// N) else (I && n && f); each Consume only advances on a match.
func (n *numScan) nanInf() error {
	p := n.p
	consume := func(b byte) bool {
		if p.at(n.i) == b {
			n.i++
			return true
		}
		return false
	}
	switch {
	case consume('N') && consume('a') && consume('N'):
		n.special = numNaN
	case consume('I') && consume('n') && consume('f'):
		n.special = numInf
		if p.at(n.i) == 'i' && !(consume('i') && consume('n') && consume('i') && consume('t') && consume('y')) {
			return parseError(reasonValueInvalid, n.i)
		}
	default:
		return parseError(reasonValueInvalid, n.i)
	}
	return nil
}

// fraction scans the fraction after its '.'.
func (n *numScan) fraction() error {
	p := n.p
	n.i++
	n.hasFracExp = true
	if !isDigit(p.at(n.i)) {
		return parseError(reasonMissFraction, n.i)
	}
	if !n.useDouble {
		// Fast path: digits go into the 64-bit significand while it
		// stays below 2^53.
		for isDigit(p.at(n.i)) {
			if n.i64 > 1<<53-1 {
				break
			}
			n.i64 = n.i64*10 + uint64(p.at(n.i)-'0')
			n.expFrac--
			if n.i64 != 0 {
				n.sigDigits++
			}
			n.i++
		}
		n.positive = n.i64 > 0
		n.useDouble = true
	}
	for isDigit(p.at(n.i)) {
		if n.sigDigits < 17 {
			if p.at(n.i) != '0' {
				n.positive = true
			}
			n.expFrac--
			if n.positive {
				n.sigDigits++
			}
		}
		n.i++
	}
	return nil
}

// exponent scans the exponent after its 'e' or 'E'.
func (n *numScan) exponent() error {
	p := n.p
	n.i++
	n.hasFracExp = true
	expMinus := false
	switch p.at(n.i) {
	case '+':
		n.i++
	case '-':
		expMinus = true
		n.i++
	}
	if !isDigit(p.at(n.i)) {
		return parseError(reasonMissExponent, n.i)
	}
	exp := int(p.at(n.i) - '0')
	n.i++
	maxExp := 308 - n.expFrac
	for isDigit(p.at(n.i)) {
		if !expMinus {
			exp = exp*10 + int(p.at(n.i)-'0')
			if exp > maxExp {
				return parseError(reasonNumberTooBig, n.start)
			}
		}
		n.i++
	}
	return nil
}

// flags is the number's class.
func (n *numScan) flags() uint8 {
	switch {
	case n.special != 0 && n.hasFracExp:
		return numOddSpecial
	case n.special != 0:
		return n.special
	case n.useDouble || n.hasFracExp:
		return numFloat
	case n.minus:
		if n.i64 == 0 {
			return numInt | numUint
		}
		return numInt
	default:
		if n.i64 <= math.MaxInt64 {
			return numUint | numInt
		}
		return numUint
	}
}
