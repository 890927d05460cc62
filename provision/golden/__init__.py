"""The golden step: a host earns golden from health and burn-in (as the site's policy says), held back while a
change to it is in flight or it is off its firmware baseline. Health and burn-in both end with it."""
