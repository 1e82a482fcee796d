// Package shapes computes areas, written to exercise the grammar queries.
package shapes

import (
	"errors"
	"math"
)

type Shape interface {
	Area() float64
}

type Circle struct {
	Radius float64
}

func (c Circle) Area() float64 {
	return math.Pi * c.Radius * c.Radius
}

type Rect struct {
	W, H float64
}

func (r *Rect) Area() float64 {
	return r.W * r.H
}

func (r *Rect) Reset() {}

func Largest(shapes []Shape) (Shape, error) {
	if len(shapes) == 0 {
		return nil, errors.New("no shapes")
	}
	best := shapes[0]
	for _, s := range shapes[1:] {
		if s.Area() > best.Area() {
			best = s
		}
	}
	return best, nil
}

func Scale(factor float64) func(float64) float64 {
	return func(x float64) float64 {
		return x * factor
	}
}
