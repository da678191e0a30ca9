-- power_feature_earliest_stored: the earliest time (epoch s) from which any GPU model's samples
-- are read rather than taken from the stored sums (power_feature_choice.stored_until_epoch_s):
-- the feature views' scan skips the whole days before it. Read by models.power_features.
-- Columns: earliest_epoch_s [s] (NULL: no model; <= 0: every sample of the window is read)
SELECT min(stored_until_epoch_s) AS earliest_epoch_s FROM power_feature_choice
