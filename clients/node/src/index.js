'use strict';
// pollen-seen-set: a batching, failing-over seen-set on a Pollen cluster
// (SeenSet), and a Crawlee RequestQueue filtered through it (withSeenSet).
const { SeenSet, NoNodeAvailable, ReplyTimeout, ReplyError } = require('./seen-set');
const { withSeenSet, seenSetStats, requestIdFor } = require('./crawlee');

module.exports = { SeenSet, NoNodeAvailable, ReplyTimeout, ReplyError, withSeenSet, seenSetStats, requestIdFor };
