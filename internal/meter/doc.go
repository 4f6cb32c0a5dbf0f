// Package meter turns allocation intervals into usage records and usage
// records into cost reports, and prices them (Prices: the catalog with
// the config's overrides, the spot market, the tenants' price plans). It
// is pure: no clock, no I/O beyond the writers it is handed; Aggregate and
// Summer sum on several goroutines, in fixed chunks merged in order, so
// their sums are the same whatever the number of cores.
//
// A Record is one replica of one run of a workload on one node, from the
// plan that placed it (Start) to the change that ended it (End; zero while
// it runs), with the GPUs it held, how it was charged (Charge) and the unit
// price in force when it started. The store writes a record in the same
// transaction as the change that opens or closes it (store.ApplyPlan and
// store.EndRun), so an interval is neither lost nor counted twice across
// restarts.
//
// Reports clip records to a window [since, until): an open record counts
// up to until. The store keeps records in a binary form (AppendRecord);
// a report reads them in place (RecordView, Aggregator.AddView) or hands
// their bytes to a Summer.
//
//	agg := meter.NewAggregator(since, until, []meter.Dim{meter.DimTenant})
//	for i := range recs {
//		agg.Add(&recs[i])
//	}
//	rep := agg.Report()
//
// Exports (WriteCSV, WriteJSON) use the column names of the FinOps FOCUS
// specification, version 1.0, where it has a column for the purpose.
package meter
