package tenancy

import (
	"slices"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
)

// A Booking is a claim on the capacity calendar that is not a
// reservation: Machines whole machines of the region (narrowed to a GPU
// model, SKU, zone or block when those are set) from Start until End
// (zero: open-ended). The server books the core's planned starts this way
// (a planned hold keeps the machines it holds GPUs on from its start for
// the planned workload's expected runtime), so that a reservation is not
// admitted for machines already promised to pending work.
type Booking struct {
	Region   string
	Model    fleet.ModelID // "" for any model
	SKU      fleet.SKUName // "" for any SKU
	Zone     string        // "" for any zone
	Block    fleet.BlockID // "" for any block
	Machines int
	Start    time.Time // zero: already started
	End      time.Time // zero: open-ended
}

// Matches reports whether node n can serve the booking.
func (b *Booking) Matches(n *fleet.Node) bool {
	return n.Region == b.Region && (b.Model == "" || n.Model == b.Model) && (b.SKU == "" || n.SKU.Name == b.SKU) &&
		(b.Zone == "" || n.Zone == b.Zone) && (b.Block == "" || n.Block == b.Block)
}

// window is the booking's window as a reservation's, for Overlaps and
// Active.
func (b *Booking) window() Reservation { return Reservation{Start: b.Start, End: b.End} }

// CheckCalendarWith is CheckCalendar counting bookings too: at every
// instant of r's window, r must fit the usable machines of its region
// together with every reservation of others and every booking active
// then. "Fit" is all or nothing and never at another claim's expense: the
// machines (one each) must serve all of r's count and as much of the
// other claims as they can serve without r (a claim already short without
// r, say because machines went down, does not refuse r for that). The
// instants checked are r's start and every start of another claim inside
// r's window, where the set of active claims grows. others must not
// include r.
func CheckCalendarWith(r *Reservation, others []Reservation, bookings []Booking, f *fleet.Fleet, usable func(*fleet.Node) bool, now time.Time) error {
	from := r.Start
	if from.IsZero() || from.Before(now) {
		from = now
	}
	window := Reservation{Start: from, End: r.End}
	var rivals []*Reservation
	var books []*Booking
	instants := []time.Time{from}
	grow := func(start time.Time) {
		if start.After(from) {
			instants = append(instants, start)
		}
	}
	for i := range others {
		if o := &others[i]; o.Region == r.Region && o.Overlaps(&window) {
			rivals = append(rivals, o)
			grow(o.Start)
		}
	}
	for i := range bookings {
		if b := &bookings[i]; b.Region == r.Region && b.Machines > 0 {
			if bw := b.window(); bw.Overlaps(&window) {
				books = append(books, b)
				grow(b.Start)
			}
		}
	}
	slices.SortFunc(instants, func(a, b time.Time) int { return a.Compare(b) })
	instants = slices.Compact(instants)
	var nodes []*fleet.Node
	for _, n := range f.Nodes {
		if n.Region == r.Region && usable(n) {
			nodes = append(nodes, n)
		}
	}
	cal := newCalendar(nodes, r, rivals, books)
	for _, at := range instants {
		if err := cal.fitsAt(at); err != nil {
			return err
		}
	}
	return nil
}

// calendar is what CheckCalendarWith checks at each instant: the usable
// machines of the region by class, and each claim's classes (computed
// once for all instants).
type calendar struct {
	r        *Reservation
	rAdj     []int
	rivals   []*Reservation
	rivalAdj [][]int
	books    []*Booking
	bookAdj  [][]int
	classes  []machineClass
	classOf  map[fleet.NodeID]int
	sizes    []machineClass // the classes at the instant checked
	flow     calendarFlow   // reused from instant to instant
}

func newCalendar(nodes []*fleet.Node, r *Reservation, rivals []*Reservation, books []*Booking) *calendar {
	c := &calendar{r: r, rivals: rivals, books: books}
	c.classes, c.classOf = classesOf(nodes)
	c.rAdj = adjOf(c.classes, r.Matches)
	for _, o := range rivals {
		var adj []int
		if len(o.Nodes) == 0 {
			adj = adjOf(c.classes, o.Matches)
		}
		c.rivalAdj = append(c.rivalAdj, adj)
	}
	for _, b := range books {
		c.bookAdj = append(c.bookAdj, adjOf(c.classes, b.Matches))
	}
	return c
}

// fitsAt checks one instant: the bound reservations active at it keep
// their machines; r, the unbound reservations and the bookings active
// then are matched to the rest (see calendarFlow).
func (c *calendar) fitsAt(at time.Time) error {
	classes := append(c.sizes[:0], c.classes...)
	c.sizes = classes
	taken := map[fleet.NodeID]bool{}
	for _, o := range c.rivals {
		if len(o.Nodes) == 0 || !o.Active(at) {
			continue
		}
		for _, id := range o.Nodes {
			if k, ok := c.classOf[id]; ok && !taken[id] {
				taken[id] = true
				classes[k].size--
			}
		}
	}
	// The others first, as much as they fit without r; then r. Augmenting
	// never lowers a claim's flow, and the others together cannot get more
	// with r than without, so r is served in full exactly when it fits
	// beside what the others already had.
	fl := &c.flow
	fl.reset(classes)
	for i, o := range c.rivals {
		if len(o.Nodes) == 0 && o.Active(at) {
			fl.add(o.Count, c.rivalAdj[i])
		}
	}
	for i, b := range c.books {
		if bw := b.window(); bw.Active(at) {
			fl.add(b.Machines, c.bookAdj[i])
		}
	}
	fl.serve()
	mine := fl.add(c.r.Count, c.rAdj)
	fl.serve()
	if fl.served[mine] == c.r.Count {
		return nil
	}
	wanted, available, zone := fl.shortfall()
	return &CalendarError{Name: c.r.Name, At: at, Zone: zone, Wanted: wanted, Available: available}
}
