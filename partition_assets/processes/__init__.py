"""Process helpers of the commands and the webserver: the workers' fork server, quick
exit, and workers that die with their coordinator."""
