package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// ServiceProperties returns the document of the account's queue service
// properties (CORS rules, logging and metrics settings) that
// UpdateServiceProperties last stored in the schema, or nil if none was.
// azq's REST server reads the properties through it on each request that
// needs them (package server's PropertiesKeeper), so that every server on
// the schema, in any process, answers with the same properties and
// applies the same CORS rules.
func (s *Service) ServiceProperties(ctx context.Context) ([]byte, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	var doc []byte
	if err := s.retry(ctx, func(db querier) error {
		return db.QueryRow(ctx, s.sql.serviceProperties).Scan(&doc)
	}); err != nil {
		return nil, dbError(ctx, err)
	}
	return doc, nil
}

// UpdateServiceProperties replaces the stored properties document with
// what update returns given the stored one (nil if none), in a
// transaction that holds the document's row: concurrent updates, by any
// process, apply one after the other, each to the document the one before
// stored. If update fails, nothing changes and its error is returned as
// it is.
func (s *Service) UpdateServiceProperties(ctx context.Context, update func(stored []byte) ([]byte, error)) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	var updateErr error
	err := s.retry(ctx, func(db querier) error {
		return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			var stored []byte
			if err := tx.QueryRow(ctx, s.sql.lockServiceProperties).Scan(&stored); err != nil {
				return err
			}
			doc, err := update(stored)
			if err != nil {
				updateErr = err
				return err
			}
			_, err = tx.Exec(ctx, s.sql.setServiceProperties, doc)
			return err
		})
	})
	if updateErr != nil && errors.Is(err, updateErr) {
		return updateErr
	}
	return dbError(ctx, err)
}
