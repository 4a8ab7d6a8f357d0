// ES module entry: the CommonJS module's exports, one copy of each class.
import pollen from './index.js';

export const { SeenSet, NoNodeAvailable, ReplyTimeout, ReplyError, withSeenSet, seenSetStats, requestIdFor } = pollen;
export default pollen;
