package pg

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/qd-run/qd/lease"
)

// AbandonOwner abandons the running runs of owner held by one of instances.
func (p *Provider) AbandonOwner(ctx context.Context, owner string, instances []string, summary string) ([]int64, error) {
	if owner == "" {
		return nil, fmt.Errorf("abandon runs: %w: owner is empty", lease.ErrInvalid)
	}
	ids := []int64{}
	if len(instances) == 0 {
		return ids, nil
	}
	err := p.inTx(ctx, func(b *pgx.Batch) {
		b.Queue(p.sql(`SELECT * FROM {{schema}}.abandon_owner($1, $2, $3)`), owner, instances, summary).
			Query(func(rows pgx.Rows) error {
				var err error
				ids, err = pgx.AppendRows(ids, rows, pgx.RowTo[int64])
				return err
			})
	})
	if err != nil {
		return nil, fmt.Errorf("abandon runs of %s: %w", owner, mapErr(err))
	}
	return ids, nil
}
